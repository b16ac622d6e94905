//! Request bodies as JSON, with every rejection answered in the API's error shape.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;

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
