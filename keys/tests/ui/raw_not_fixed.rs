use strata_keys::raw_key;

// A `String` has no fixed width: only a tail may hold one.
struct Conn { name: String }
raw_key! {
    Conn -> () = ([2], {name});
}

fn main() {}
