//! The impls of a value that is written as its `Display` text wherever it
//! appears (debug output, JSON, the ledger) and read back by its parser.

/// Implements `Debug` (as `Name(text)`), `FromStr`, `Serialize` (as the
/// `Display` text) and `Deserialize` (through `$parse`, whose error
/// `$error` becomes the deserializer's) for `$type`.
///
/// One definition, so that a slug, a digest and a timestamp cannot drift
/// apart in how they are stored and read back.
macro_rules! text_form {
    ($type:ident, $error:ty, $parse:path) => {
        impl ::std::fmt::Debug for $type {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}({self})", stringify!($type))
            }
        }

        impl ::std::str::FromStr for $type {
            type Err = $error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $parse(s)
            }
        }

        impl ::serde::Serialize for $type {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $type {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let raw = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                $parse(&raw).map_err(::serde::de::Error::custom)
            }
        }
    };
}
