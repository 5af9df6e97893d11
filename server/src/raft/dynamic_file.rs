//! ZooKeeper's dynamic configuration file, kept as ZooKeeper 3.5+ keeps it: each committed
//! configuration is written next to zoo.cfg as `zoo.cfg.dynamic.<version>` (its server
//! lines; the version, in hex, is in the name), and zoo.cfg is rewritten without server
//! lines and with `dynamicConfigFile=` naming it. A restarted member, or an operator
//! reading the files, then sees the committed membership; zoo.cfg's server lines were
//! only the first one.
//!
//! Both files are written to a temporary name and renamed, so a crash leaves the old or
//! the new one, never half of either.

use std::io;
use std::path::{Path, PathBuf};

use crate::state::reconfig::DynamicConfig;

/// Writes `c` as the dynamic file beside `config_file` and points `config_file` at it;
/// returns the dynamic file's path.
pub fn persist(config_file: &Path, c: &DynamicConfig) -> io::Result<PathBuf> {
    let name = config_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "zoo.cfg".into());
    let dynamic_name = format!("{name}.dynamic.{:x}", c.version);
    let dynamic = config_file.with_file_name(&dynamic_name);
    let mut lines = String::new();
    for spec in c.servers.values() {
        lines.push_str(&spec.line());
        lines.push('\n');
    }
    replace(&dynamic, &lines)?;
    let current = std::fs::read_to_string(config_file)?;
    let mut rewritten: String = current
        .lines()
        .filter(|l| {
            let key = l.split('=').next().unwrap_or("").trim();
            !key.starts_with("server.") && key != "dynamicConfigFile"
        })
        .map(|l| format!("{l}\n"))
        .collect();
    rewritten.push_str(&format!("dynamicConfigFile={dynamic_name}\n"));
    replace(config_file, &rewritten)?;
    Ok(dynamic)
}

fn replace(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp-zooraft");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoo_cfg_names_the_new_dynamic_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("zoo.cfg");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("myid"), "1\n").unwrap();
        let start = format!(
            "tickTime=2000\nserver.1=h:1:2\nserver.2=h:3:4\ndataDir={}\n",
            data.display()
        );
        std::fs::write(&cfg, start).unwrap();
        let c = DynamicConfig::parse("server.1=h:1:2;5\nversion=100000003").unwrap();
        let dynamic = persist(&cfg, &c).unwrap();
        assert_eq!(dynamic, dir.path().join("zoo.cfg.dynamic.100000003"));
        assert_eq!(
            std::fs::read_to_string(&dynamic).unwrap(),
            "server.1=h:1:2:participant;0.0.0.0:5\n"
        );
        assert_eq!(
            std::fs::read_to_string(&cfg).unwrap(),
            format!(
                "tickTime=2000\ndataDir={}\ndynamicConfigFile=zoo.cfg.dynamic.100000003\n",
                data.display()
            )
        );
        // Read back the way a restart reads it.
        let o = crate::config::Overrides {
            config: Some(cfg.clone()),
            ..Default::default()
        };
        let loaded = o.load().unwrap();
        assert_eq!(loaded.members.keys().copied().collect::<Vec<_>>(), [1]);
    }
}
