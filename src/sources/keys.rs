//! The keys that open SOPS files, read where sops and Flux read them: an age key file
//! (`--age-key-file` or `GITFLEET_AGE_KEY_FILE`, else `SOPS_AGE_KEY_FILE`) and age keys in the environment (`SOPS_AGE_KEY`).
//! The edge of [`super`]: the only part that reads files or the environment.

use super::sops::AgeIdentities;
use std::path::{Path, PathBuf};

/// Why the keys could not be loaded. Never holds a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the age key file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the age key file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("SOPS_AGE_KEY: {0}")]
    Env(String),
}

/// The keys SOPS files are decrypted with; empty when none is given (a SOPS file is then an
/// error naming it).
#[derive(Debug, Default)]
pub struct Keys {
    pub(super) age: AgeIdentities,
}

impl Keys {
    /// No keys.
    pub fn none() -> Self {
        Keys::default()
    }

    /// The keys of the age key file `file` and of `env_keys` (the text of `SOPS_AGE_KEY`: one
    /// key per line), together.
    pub fn load(file: Option<&Path>, env_keys: Option<&str>) -> Result<Self, KeyError> {
        let mut age = AgeIdentities::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            age.extend(
                AgeIdentities::parse(&text).map_err(|message| KeyError::File {
                    path: path.to_path_buf(),
                    message,
                })?,
            );
        }
        if let Some(text) = env_keys.filter(|t| !t.trim().is_empty()) {
            age.extend(AgeIdentities::parse(text).map_err(KeyError::Env)?);
        }
        Ok(Keys { age })
    }

    /// [`Keys::load`] with `file` (the flag, whose value clap also takes from
    /// `GITFLEET_AGE_KEY_FILE`), else `SOPS_AGE_KEY_FILE` as sops and Flux read it, and
    /// `SOPS_AGE_KEY` from the environment.
    pub fn from_env(file: Option<&Path>) -> Result<Self, KeyError> {
        let sops_file = std::env::var_os("SOPS_AGE_KEY_FILE")
            .filter(|f| !f.is_empty())
            .map(std::path::PathBuf::from);
        let env_keys = std::env::var("SOPS_AGE_KEY").ok();
        Keys::load(file.or(sops_file.as_deref()), env_keys.as_deref())
    }

    /// From the text of an age key file (tests and library users).
    pub fn from_age_keys(text: &str) -> Result<Self, KeyError> {
        Keys::load(None, Some(text))
    }
}
