//! Decoding what clients send as JSON into typed requests, with errors that name the field: a
//! load's body (REST) and a tool's arguments (MCP) are read the same way and refused in the same
//! words.

use serde::de::DeserializeOwned;

/// Why JSON could not be read as the request it should be.
#[derive(Debug, thiserror::Error)]
pub enum InvalidJson {
    /// Not JSON at all (or cut short).
    #[error("{0}")]
    Syntax(serde_json::Error),
    /// JSON of another shape or with other values: what is wrong, after the path of the field
    /// (`token_limit: invalid value ...`), or alone when it is the whole value.
    #[error("{0}")]
    Value(String),
}

/// `deserializer`'s JSON as `T`.
pub fn decode<'de, T, D>(deserializer: D) -> Result<T, InvalidJson>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de, Error = serde_json::Error>,
{
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let error = error.into_inner();
        match (error.classify(), path.as_str()) {
            (serde_json::error::Category::Data, ".") => InvalidJson::Value(error.to_string()),
            (serde_json::error::Category::Data, path) => InvalidJson::Value(format!("{path}: {error}")),
            _ => InvalidJson::Syntax(error),
        }
    })
}

/// A JSON value already parsed (a tool's arguments) as `T`.
pub fn decode_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, InvalidJson> {
    decode(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        #[allow(dead_code)]
        token_limit: Option<u32>,
    }

    #[test]
    fn errors_name_the_field() {
        let error = decode_value::<Request>(serde_json::json!({"token_limit": "x"})).unwrap_err();
        assert!(error.to_string().starts_with("token_limit: invalid type"), "{error}");
        let error = decode_value::<Request>(serde_json::json!({"other": 1})).unwrap_err();
        assert!(error.to_string().starts_with("other: unknown field `other`"), "{error}");
        let cut = decode::<Request, _>(&mut serde_json::Deserializer::from_slice(b"{\"token_limit\": 1")).unwrap_err();
        assert!(matches!(cut, InvalidJson::Syntax(_)), "{cut}");
    }
}
