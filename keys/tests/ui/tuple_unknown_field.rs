use strata_keys::tuple_key;

struct Doc { id: u64 }
tuple_key! {
    Doc -> () = ("doc", {id}, {tenant});
}

fn main() {}
