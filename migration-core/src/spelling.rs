//! The impls of a closed set of values spelled one way each: an enum with
//! `ALL`, every value once, and `as_str`, its spelling.

/// Implements `Display` (the `as_str` spelling) and `FromStr` (its
/// inverse over `ALL`; a string that spells none becomes the error
/// `$unknown` makes of it) for the enum `$type`.
///
/// One definition, so that each spelling is written once, in `as_str`, and
/// printing and parsing cannot drift apart.
macro_rules! spelled {
    ($type:ident, $error:ty, $unknown:expr) => {
        impl ::std::fmt::Display for $type {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $type {
            type Err = $error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $type::ALL
                    .into_iter()
                    .find(|value| value.as_str() == s)
                    .ok_or_else(|| $unknown(s))
            }
        }
    };
}
