//! Whole numbers from JSON, as JSON Schema counts them.
//!
//! JSON has one number type, and JSON Schema's `integer` is "a number with a zero fractional
//! part": `5`, `5.0` and `5e0` are the same integer. The API publishes its integer fields as
//! `integer`, so it accepts all three spellings; serde's own `u64` would refuse `5.0`, and a
//! client generated from the document (or a language whose numbers are all floats) would see a
//! schema-valid request rejected. Every integer field of a request reads through one of these
//! helpers (`#[serde(deserialize_with = "crate::whole::u64")]`); a fraction, a value out of the
//! type's range or a non-number is still an error, whose message names the expected type.
//!
//! [`parse`] does the same for text (query strings and path segments), so `limit=5.0` and
//! `limit=5` are one request.

use serde::de::{self, Deserializer, Visitor};
use std::{fmt, marker::PhantomData};

/// An integer type a whole number may become.
pub trait Whole: Sized + Copy {
    const NAME: &'static str;
    fn from_i128(value: i128) -> Option<Self>;
}

macro_rules! whole {
    ($($t:ident),*) => {$(
        impl Whole for $t {
            const NAME: &'static str = concat!("a whole number that fits ", stringify!($t));
            fn from_i128(value: i128) -> Option<Self> {
                $t::try_from(value).ok()
            }
        }
    )*};
}
whole!(u16, u32, u64, i64);

/// The integer a finite float with no fractional part stands for (`None` otherwise). Floats
/// past `i128` cannot fit any [`Whole`] type, so saturating there changes no answer.
fn integral(f: f64) -> Option<i128> {
    (f.is_finite() && f.fract() == 0.0).then_some(f as i128)
}

/// Reads a whole number from text: an integer, or a decimal or exponent form with no fraction
/// (`5`, `5.0`, `5e0`), surrounding spaces not allowed.
pub fn parse<T: Whole>(text: &str) -> Option<T> {
    let value = match text.parse::<i128>() {
        Ok(i) => i,
        Err(_) => integral(text.parse::<f64>().ok()?)?,
    };
    T::from_i128(value)
}

struct WholeVisitor<T>(PhantomData<T>);

impl<'de, T: Whole> Visitor<'de> for WholeVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::NAME)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::from_i128(i128::from(v)).ok_or_else(|| E::custom(format_args!("expected {}", T::NAME)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::from_i128(i128::from(v)).ok_or_else(|| E::custom(format_args!("expected {}", T::NAME)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        integral(v)
            .and_then(T::from_i128)
            .ok_or_else(|| E::custom(format_args!("expected {}", T::NAME)))
    }
}

struct OptionVisitor<T>(PhantomData<T>);

impl<'de, T: Whole> Visitor<'de> for OptionVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "null or {}", T::NAME)
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(WholeVisitor(PhantomData)).map(Some)
    }
}

fn whole<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(WholeVisitor(PhantomData))
}

fn optional<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(OptionVisitor(PhantomData))
}

/// `deserialize_with` for a `u64` field.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole(d)
}

/// `deserialize_with` for a `u32` field.
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(d)
}

/// `deserialize_with` for an `Option<u64>` field (`null` is `None`).
pub fn option_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    optional(d)
}

/// `deserialize_with` for an `Option<u16>` field.
pub fn option_u16<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    optional(d)
}

/// `deserialize_with` for an `Option<i64>` field.
pub fn option_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    optional(d)
}

/// `deserialize_with` for an `i64` field.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    whole(d)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Fields {
        #[serde(deserialize_with = "super::u64")]
        n: u64,
        #[serde(default, deserialize_with = "super::option_u64")]
        maybe: Option<u64>,
        #[serde(default, deserialize_with = "super::option_i64")]
        signed: Option<i64>,
    }

    fn read(json: &str) -> Result<Fields, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn every_spelling_of_a_whole_number_is_that_number() {
        for json in [r#"{"n": 5}"#, r#"{"n": 5.0}"#, r#"{"n": 5e0}"#, r#"{"n": 0.5e1}"#] {
            assert_eq!(read(json).unwrap().n, 5, "{json}");
        }
        let f = read(r#"{"n": 1577.0, "maybe": 22393532596422.0, "signed": -32603.0}"#).unwrap();
        assert_eq!(
            f,
            Fields {
                n: 1577,
                maybe: Some(22_393_532_596_422),
                signed: Some(-32_603)
            }
        );
        assert_eq!(read(r#"{"n": 1, "maybe": null}"#).unwrap().maybe, None);
        assert_eq!(read(r#"{"n": 18446744073709551615}"#).unwrap().n, u64::MAX);
    }

    #[test]
    fn fractions_negatives_overflow_and_other_types_are_refused() {
        for json in [
            r#"{"n": 5.5}"#,
            r#"{"n": -1}"#,
            r#"{"n": -1.0}"#,
            r#"{"n": 18446744073709551616}"#,
            r#"{"n": 1e300}"#,
            r#"{"n": "5"}"#,
            r#"{"n": true}"#,
            r#"{"n": null}"#,
        ] {
            let e = read(json).unwrap_err();
            assert!(e.contains("whole number"), "{json}: {e}");
        }
    }

    #[test]
    fn text_reads_the_same_numbers() {
        assert_eq!(super::parse::<u32>("5"), Some(5));
        assert_eq!(super::parse::<u32>("5.0"), Some(5));
        assert_eq!(super::parse::<u32>("5e0"), Some(5));
        for bad in ["5.5", "-1", "", " 5", "x", "4294967296", "NaN", "inf"] {
            assert_eq!(super::parse::<u32>(bad), None, "{bad}");
        }
    }
}
