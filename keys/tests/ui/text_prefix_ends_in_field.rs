use strata_keys::{text_key, text_prefix};

struct VerMeta { function: String, version: u32 }
struct Fn { function: String }
text_key! {
    VerMeta -> () = ("cs:fn:", {function}, ":ver:", {version:06}, ":meta");
}
// Ending with a field, `cs:fn:ab` would also match the function `abc`.
text_prefix! {
    Fn of VerMeta = ("cs:fn:", {function});
}

fn main() {}
