//! Typed launches: a wrong argument count, type or order, a launch outside `unsafe`, and a launch
//! of a kernel known only by name are compile errors; so are the ways around the safe API's
//! promises: uninitialised memory asked for outside `unsafe`, a zeroed allocation of a type zero
//! is not valid for, and a user's type posing as an `Element` (each case in
//! `tests/compile-fail/`, with the compiler's message it must produce beside it).
#[test]
fn typed_launches_reject_wrong_arguments_at_compile_time() {
    trybuild::TestCases::new().compile_fail("compile-fail/*.rs");
}
