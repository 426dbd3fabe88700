//! One generic async task: run a closure on the libuv thread pool, resolve with its value or
//! reject with the rich `{code, message, details}` error.

use napi::bindgen_prelude::{Env, ToNapiValue, TypeName};
use napi::{Status, Task};

use crate::error::BindingError;

/// The work of one async call.
pub type Work<T> = Box<dyn FnOnce() -> Result<T, BindingError> + Send + 'static>;

/// A disk job: the closure runs off the JavaScript thread.
pub struct Job<T: Send + 'static> {
    work: Option<Work<T>>,
    failure: Option<BindingError>,
}

impl<T: Send + 'static> Job<T> {
    /// Wraps `work`.
    pub fn new(work: impl FnOnce() -> Result<T, BindingError> + Send + 'static) -> Self {
        Self {
            work: Some(Box::new(work)),
            failure: None,
        }
    }
}

impl<T> Task for Job<T>
where
    T: ToNapiValue + TypeName + Send + 'static,
{
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self
            .work
            .take()
            .ok_or_else(|| napi::Error::new(Status::GenericFailure, "job ran twice"))?;
        match work() {
            Ok(value) => Ok(value),
            Err(error) => {
                let message = error.to_string();
                self.failure = Some(error);
                Err(napi::Error::new(Status::GenericFailure, message))
            }
        }
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<T> {
        let error = self
            .failure
            .take()
            .unwrap_or_else(|| BindingError::failed(err.reason.clone()));
        Err(error.into_napi(&env))
    }
}
