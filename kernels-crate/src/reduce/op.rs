//! The reduction operators: sum, min and max, each with its identity.
use super::{Max, Min, Sum};
use crate::device::element::Element;

/// A reduction operator: an associative combine and its identity.
pub trait Op {
    /// The identity element for `T`.
    fn identity<T: Element>() -> T;
    /// Combines two values.
    fn combine<T: Element>(a: T, b: T) -> T;
}

impl Op for Sum {
    /// `-0.0` for floats (`T::ADD_IDENTITY`): the exact identity of `+`, so that a sum of only
    /// `-0.0` elements is `-0.0`, as IEEE 754 adds them (`+0.0 + -0.0` is `+0.0`).
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::ADD_IDENTITY
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.add(b)
    }
}

impl Op for Min {
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::MIN_IDENTITY
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.min(b)
    }
}

impl Op for Max {
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::MAX_IDENTITY
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.max(b)
    }
}
