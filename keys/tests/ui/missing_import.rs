use strata_keys::text_key;

// `Ulid` is not imported: the one error points at the user's own struct,
// not into the macro.
struct Activation {
    id: Ulid,
}
text_key! {
    Activation -> () = ("act:", {id});
}

fn main() {}
