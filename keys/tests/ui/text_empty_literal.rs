use strata_keys::text_key;

struct Evt { ts: u64 }
text_key! {
    Evt -> () = ("evt:", {ts:013}, "");
}

fn main() {}
