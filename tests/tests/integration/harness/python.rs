//! Python packages for the suites that run Python clients: importable as they are (`.ci/run`
//! installed them), or installed from PyPI into a folder of `target/` first.

use std::path::{Path, PathBuf};

/// The Python to run (`$PYTHON`, else `python3`) and a `PYTHONPATH` under which `imports`
/// (a comma-separated `import` list) work: `target/<folder>`, where the packages of
/// `requirements` are installed when they are not importable already.
pub async fn python_with(imports: &str, requirements: &Path, folder: &str) -> (String, PathBuf) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let deps = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(folder);
    let importable = || async {
        tokio::process::Command::new(&python)
            .args(["-c", &format!("import {imports}")])
            .env("PYTHONPATH", &deps)
            .output()
            .await
            .unwrap_or_else(|e| panic!("running {python}: {e}"))
            .status
            .success()
    };
    if !importable().await {
        let pip = tokio::process::Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--target"])
            .arg(&deps)
            .arg("-r")
            .arg(requirements)
            .output()
            .await
            .unwrap();
        assert!(
            pip.status.success() && importable().await,
            "{imports} cannot be imported and installing them failed: run `{python} -m pip \
             install -r {}`\n{}",
            requirements.display(),
            String::from_utf8_lossy(&pip.stderr)
        );
    }
    (python, deps)
}
