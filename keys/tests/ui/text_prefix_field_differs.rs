use strata_keys::{text_key, text_prefix};

struct Meta { tenant: String, function: String }
struct ByTenant { tenant: String, funcname: String }
text_key! {
    Meta -> () = ("cs:", {tenant}, ":", {function}, ":meta");
}
// `funcname` is not the key's `function` (a different name of the same
// length): the prefix's fields must be the key's.
text_prefix! {
    ByTenant of Meta = ("cs:", {tenant}, ":", {funcname}, ":");
}

fn main() {}
