use strata_keys::{text_key, text_prefix};

struct VerMeta { function: String, version: u32 }
struct FnVersions { function: String }
text_key! {
    VerMeta -> () = ("cs:fn:", {function}, ":ver:", {version:06}, ":meta");
}
// `:v:` is not the key's `:ver:`: the prefix would match no key.
text_prefix! {
    FnVersions of VerMeta = ("cs:fn:", {function}, ":v:");
}

fn main() {}
