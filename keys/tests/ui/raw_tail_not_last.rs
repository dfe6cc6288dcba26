use strata_keys::raw_key;

struct Conn { name: String, n: u32 }
raw_key! {
    Conn -> () = ([2], ..{name}, {n});
}

fn main() {}
