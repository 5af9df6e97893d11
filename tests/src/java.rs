//! Compiling and running the Java test programs under `tests/java/` against Debian's
//! Apache ZooKeeper 3.8 and Curator 5.4 jars.
//!
//! Java programs are compiled once per test process into a temporary directory (javac is
//! slow; every test in a binary shares the result).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The jars a Curator client needs, in Debian's layout. ZooKeeper's jar lists its own
/// dependencies in its manifest, so it brings netty, slf4j and jute along.
const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/slf4j-simple.jar",
];

/// The directory holding the Java sources of the test programs.
pub fn sources_dir() -> PathBuf {
    crate::suite_dir().join("java")
}

/// The class path for compiling and running: the jars above plus `classes`.
pub fn class_path(classes: &Path) -> String {
    let mut parts: Vec<String> = JARS.iter().map(|s| s.to_string()).collect();
    parts.push(classes.display().to_string());
    parts.join(":")
}

static COMPILED: OnceLock<PathBuf> = OnceLock::new();

/// Compiles every `.java` file in `tests/java/` (once per process) and returns the classes
/// directory. Panics with javac's output if compilation fails: a test cannot run without it.
pub fn compiled_classes() -> &'static Path {
    COMPILED.get_or_init(|| {
        for jar in JARS {
            assert!(
                Path::new(jar).exists(),
                "{jar} is missing: install Debian's zookeeper and libcurator-recipes-java"
            );
        }
        let out = std::env::temp_dir().join(format!("zooraft-java-{}", std::process::id()));
        std::fs::create_dir_all(&out).expect("create classes directory");
        let sources: Vec<PathBuf> = std::fs::read_dir(sources_dir())
            .expect("read tests/java")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
        assert!(
            !sources.is_empty(),
            "no Java sources in {}",
            sources_dir().display()
        );
        let output = Command::new("javac")
            .arg("-nowarn")
            .arg("-d")
            .arg(&out)
            .arg("-cp")
            .arg(class_path(&out))
            .args(&sources)
            .output()
            .expect("run javac");
        assert!(
            output.status.success(),
            "javac failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        out
    })
}

/// A `java` command ready to run `main_class` from the compiled test programs.
pub fn java_command(main_class: &str) -> Command {
    let classes = compiled_classes();
    let mut cmd = Command::new("java");
    cmd.arg("-Xmx256m")
        .arg("-XX:+UseSerialGC")
        .arg("-cp")
        .arg(class_path(classes))
        .arg(main_class);
    cmd
}
