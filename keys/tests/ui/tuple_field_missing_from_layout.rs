use strata_keys::tuple_key;

// `version` is not in the layout: the key would not read back whole.
struct Doc { id: u64, version: u64 }
tuple_key! {
    Doc -> () = ("doc", {id});
}

fn main() {}
