use strata_keys::tuple_key;

struct Seq { n: u64 }
tuple_key! {
    Seq -> () = ("seq", {n:020});
}

fn main() {}
