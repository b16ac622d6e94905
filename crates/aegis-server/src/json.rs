//! Request bodies as JSON, with every rejection answered in the API's error shape.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::error::ApiError;

/// JSON bodies whose every rejection answers in the API's error shape.
pub(crate) struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_error(rejection)),
        }
    }
}

/// For optional fields (with `#[serde(default)]`): left out is `None`, but `null` is refused
/// like any other wrong type, as the description (a string, not a nullable one) says.
pub(crate) fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// An optional integer, written as JSON allows it: `7` or `7.0` (JSON Schema's "integer" is any
/// number without a fraction), but not `7.5`, `null` or a string.
pub(crate) fn whole_number<'de, D>(deserializer: D) -> Result<Option<i64>, D::Error>
where
    D: Deserializer<'de>,
{
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.007e15)
            .map(|f| f as i64)
    });
    whole
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("{number} is not a whole number")))
}

fn json_error(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_request",
        _ => "malformed_json",
    };
    let message = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "send the body as JSON with Content-Type: application/json".to_string()
        }
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is over the size limit".to_string(),
        _ => rejection.body_text(),
    };
    ApiError::new(status, code, message)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "super::whole_number")]
        id: Option<i64>,
        #[serde(default, deserialize_with = "super::not_null")]
        text: Option<String>,
    }

    fn parse(json: &str) -> Result<Body, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn optional_fields_may_be_left_out_but_not_null() {
        let empty = parse("{}").expect("both left out");
        assert_eq!((empty.id, empty.text), (None, None));
        assert!(parse(r#"{"text": null}"#).is_err());
        assert!(parse(r#"{"id": null}"#).is_err());
        assert_eq!(
            parse(r#"{"text": "x"}"#).expect("text").text.as_deref(),
            Some("x")
        );
    }

    #[test]
    fn a_whole_number_may_carry_a_zero_fraction() {
        assert_eq!(parse(r#"{"id": 7}"#).expect("7").id, Some(7));
        assert_eq!(parse(r#"{"id": 599617.0}"#).expect("7.0").id, Some(599617));
        for bad in [r#"{"id": 7.5}"#, r#"{"id": "7"}"#, r#"{"id": 1e300}"#] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
