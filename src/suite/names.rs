//! The names a suite writes for the values of its enumerations: one table
//! per type ([`names!`]), read both ways — a value's name in messages and
//! records, a name's value when a suite is decoded, and the list of names
//! for "expected one of" and "did you mean".

/// A type whose values have names in suites.
pub trait Named: Copy + 'static {
    /// Every value with its name, in the order suites and messages list them.
    fn all() -> &'static [(&'static str, Self)];

    /// The value named `name`.
    fn named(name: &str) -> Option<Self> {
        Self::all()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// Every name, in order.
    fn names() -> Vec<&'static str> {
        Self::all().iter().map(|(n, _)| *n).collect()
    }
}

/// Gives an enumeration its names: `ALL`, `name()` (an exhaustive match:
/// a variant without a name does not compile) and [`Named`].
macro_rules! names {
    ($t:ident { $($v:ident => $n:literal),+ $(,)? }) => {
        impl $t {
            /// Every value with its name in suites, in order.
            pub const ALL: [(&'static str, $t); [$($n),+].len()] = [$(($n, $t::$v)),+];

            /// The name used in suites.
            pub fn name(self) -> &'static str {
                match self {
                    $($t::$v => $n),+
                }
            }
        }

        impl $crate::suite::names::Named for $t {
            fn all() -> &'static [(&'static str, Self)] {
                &Self::ALL
            }
        }
    };
}
pub(crate) use names;
