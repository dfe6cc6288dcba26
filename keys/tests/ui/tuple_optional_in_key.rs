use strata_keys::tuple_key;

struct Event { ts: Option<i64> }
tuple_key! {
    Event -> () = (1, ?{ts});
}

fn main() {}
