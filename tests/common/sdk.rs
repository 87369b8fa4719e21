//! Reference implementations from the AWS SDK for Python (botocore,
//! from PyPI), which the Bedrock tests hold weir and the stand-in to.

#![allow(dead_code)]

/// botocore, the AWS SDK for Python's core, pinned: the reference signer.
const BOTOCORE: &str = "botocore==1.43.11";

/// A python with botocore: the SDK tests' virtual environment (made by
/// `.ci/run`, or here on first use), botocore installed into it when
/// missing.
pub fn botocore_python() -> std::path::PathBuf {
    let venv = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-venv");
    let python = venv.join("bin/python");
    let ready = || {
        std::process::Command::new(&python)
            .args(["-c", "import botocore"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ready() {
        if !python.exists() {
            let made = std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect("python3 is needed for the SigV4 reference");
            assert!(made.success(), "python3 -m venv failed");
        }
        // `python -m pip`: the venv's `pip` script names the python it was
        // made with, which a copied target directory no longer has.
        let pip = std::process::Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", BOTOCORE])
            .status()
            .expect("pip");
        assert!(pip.success(), "installing {BOTOCORE} from PyPI failed");
        assert!(ready(), "botocore does not import after installing");
    }
    python
}
