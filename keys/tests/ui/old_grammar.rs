use strata_keys::text_key;

// The struct is written outside the macro now.
text_key! {
    pub struct Evt { ts: u64 } -> () = ("evt:" {ts:013});
}

fn main() {}
