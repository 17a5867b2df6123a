//! Typed launches: a wrong argument count, type or order, a launch outside `unsafe`, and a launch
//! of a kernel known only by name are compile errors; so are the ways around the safe API's
//! promises: uninitialised memory asked for outside `unsafe`, a zeroed allocation of a type zero
//! is not valid for, and a user's type posing as an `Element` (each case in
//! `tests/compile-fail/`, with the compiler's message it must produce beside it).
//!
//! trybuild checks the cases in a scratch project with a target directory of its own, where
//! ferrocuda's build script would compile the kernels' PTX again (`core` and the kernels, once
//! per architecture). The builder's shared directory points it at this workspace's PTX builds
//! instead, which the test binary's own build has just made.
#[test]
fn typed_launches_reject_wrong_arguments_at_compile_time() {
    let builds = ferrocuda_tests::workspace_ptx_builds(env!("CARGO_TARGET_TMPDIR"));
    // `ferrocuda_builder::TARGET_DIR_ENV`. SAFETY: this binary's only test, which sets the
    // variable before it starts anything.
    unsafe { std::env::set_var("FERROCUDA_BUILDER_TARGET_DIR", builds) };
    trybuild::TestCases::new().compile_fail("compile-fail/*.rs");
}
