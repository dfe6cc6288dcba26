use strata_keys::tuple_key;

struct Path { parts: Vec<String>, leaf: u64 }
tuple_key! {
    Path -> () = (1, ..{parts}, {leaf});
}

fn main() {}
