//! Where the validator templates are: one rule for the CLI, the HTTP server and the app, and
//! never a path compiled in from the machine that built the binary.

use std::path::{Path, PathBuf};

use crate::error::{GuardError, Result};

/// Names a templates folder for every command and the app.
pub const PROMPTS_ENV: &str = "AEGIS_PROMPTS";
/// The templates folder's name wherever it is looked for.
pub const PROMPTS_FOLDER: &str = "prompt_guard";
/// Folders above the executable that are searched: a binary in a clone's `target/release/`
/// (or a test binary in `target/release/deps/`) finds the clone's templates.
const LEVELS_ABOVE_EXECUTABLE: usize = 3;

/// The templates folder: `given` (a flag or a setting) if any, else `AEGIS_PROMPTS`, else
/// `prompt_guard` in the current folder, beside the executable or a few folders above it, else
/// in `data_dir` (the app's data folder). A folder named explicitly must exist; when nothing is
/// found, the error lists every place looked in.
pub fn find_prompts_dir(given: Option<&Path>, data_dir: Option<&Path>) -> Result<PathBuf> {
    let named = given
        .map(|dir| (dir.to_path_buf(), "the folder given"))
        .or_else(|| {
            std::env::var_os(PROMPTS_ENV).map(|dir| (dir.into(), "the folder AEGIS_PROMPTS names"))
        });
    if let Some((dir, from)) = named {
        return if dir.is_dir() {
            Ok(dir)
        } else {
            Err(GuardError::PromptsNotFound {
                looked: vec![dir],
                hint: format!("{from} does not exist"),
            })
        };
    }
    let executable = std::env::current_exe().ok();
    let candidates = candidates(executable.as_deref(), data_dir);
    candidates
        .iter()
        .find(|dir| dir.is_dir())
        .cloned()
        .ok_or_else(|| GuardError::PromptsNotFound {
            looked: candidates,
            hint: format!("pass --prompts, set {PROMPTS_ENV}, or choose a folder in Settings"),
        })
}

/// Where to look, in order, when no folder is named.
fn candidates(executable: Option<&Path>, data_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(PROMPTS_FOLDER)];
    if let Some(folder) = executable.and_then(Path::parent) {
        dirs.extend(
            folder
                .ancestors()
                .take(LEVELS_ABOVE_EXECUTABLE + 1)
                .map(|dir| dir.join(PROMPTS_FOLDER)),
        );
    }
    dirs.extend(data_dir.map(|dir| dir.join(PROMPTS_FOLDER)));
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_in_the_working_folder_then_up_from_the_executable_then_the_data_folder() {
        let looked = candidates(
            Some(Path::new("/clone/target/release/deps/aegis")),
            Some(Path::new("/home/u/.local/share/aegis")),
        );
        let expected: Vec<PathBuf> = [
            "prompt_guard",
            "/clone/target/release/deps/prompt_guard",
            "/clone/target/release/prompt_guard",
            "/clone/target/prompt_guard",
            "/clone/prompt_guard",
            "/home/u/.local/share/aegis/prompt_guard",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(looked, expected);
    }

    #[test]
    fn a_named_folder_that_is_missing_is_an_error_naming_it() {
        let missing = Path::new("/nowhere/templates");
        let err = find_prompts_dir(Some(missing), None).expect_err("missing");
        assert!(err.to_string().contains("/nowhere/templates"), "{err}");
    }

    #[test]
    fn a_named_folder_that_exists_is_used_as_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            find_prompts_dir(Some(dir.path()), None).expect("found"),
            dir.path()
        );
    }
}
