//! How a resource's value travels from the server's render to the page it hydrates: JSON, read
//! back with the reader a server function's answer is read with (`serde_json` over bytes).
//!
//! Leptos's default resource codec reads JSON from a `&str`, and a server function reads its
//! answer from bytes. The two readers are two instantiations of every `Deserialize` impl a page
//! reads, so each type's decoding was compiled into the WASM twice. Every resource here uses
//! [`resource`], so each type is decoded by one reader: the WASM's code before optimisation went
//! from 2.91 to 2.70 MB, and the brotli pieces of a profile's page from 266 to 254 KB.

use codee::{Decoder, Encoder};
use leptos::prelude::Resource as LeptosResource;
use serde::{de::DeserializeOwned, Serialize};
use std::future::Future;

/// JSON, decoded from the text's bytes (see the module's comment).
pub struct Json;

impl<T: Serialize> Encoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(val: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(val)
    }
}

impl<T: DeserializeOwned> Decoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(val: &str) -> Result<T, serde_json::Error> {
        serde_json::from_slice(val.as_bytes())
    }
}

/// A resource whose value travels as [`Json`].
pub type Resource<T> = LeptosResource<T, Json>;

/// [`leptos::prelude::Resource::new`], with the [`Json`] codec: loads `fetcher(source())`,
/// again whenever `source` changes; on the server, the value is sent with the page.
#[track_caller]
pub fn resource<S, T, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Resource<T>
where
    S: Send + Sync + Clone + PartialEq + 'static,
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    LeptosResource::new_with_options(source, fetcher, false)
}

/// JSON text read as a [`serde_json::Value`] with the same reader.
pub fn value(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_slice(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_goes_through_and_comes_back_the_same() {
        let v: Result<Vec<(String, Option<u32>)>, String> =
            Ok(vec![("é ✓".to_owned(), Some(7)), ("".to_owned(), None)]);
        let text = <Json as Encoder<_>>::encode(&v).unwrap();
        let back: Result<Vec<(String, Option<u32>)>, String> = <Json as Decoder<_>>::decode(&text).unwrap();
        assert_eq!(back, v);
        assert!(<Json as Decoder<u32>>::decode("\"seven\"").is_err());
        assert_eq!(value("{\"a\": [1]}").unwrap()["a"][0], 1);
    }
}
