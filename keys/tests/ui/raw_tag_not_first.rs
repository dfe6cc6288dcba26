use strata_keys::raw_key;

struct Msg { id: u64 }
raw_key! {
    Msg -> () = ({id}, [5]);
}

fn main() {}
