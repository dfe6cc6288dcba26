//! Every misuse of the key macros' grammar that they reject, as a build
//! that must fail with the message in `tests/ui/*.stderr`.

#[test]
fn misused_key_macros_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
