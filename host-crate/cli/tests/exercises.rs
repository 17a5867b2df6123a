//! The guide's exercises: every answer folded under an exercise (`<details>` ... `</details>`
//! on a page of `docs/` or `docs/en/`) carries at least one check, `<!-- check: ARGS =>
//! TEXT -->`, and each check holds: `ferrocuda --device cpu ARGS` succeeds and prints TEXT (on
//! stdout or stderr). The checks run on the CPU device, which every machine has and which
//! gives the same answers everywhere.
use std::path::{Path, PathBuf};
use std::process::Command;

/// One check: the page it is on, the arguments after `--device cpu`, the text to find.
#[derive(Debug, PartialEq)]
struct Check {
    page: String,
    args: Vec<String>,
    expect: String,
}

/// The checks of `page`, and the answers (`<details>` blocks) that have none.
fn checks(name: &str, page: &str) -> (Vec<Check>, Vec<String>) {
    let mut found = Vec::new();
    let mut unchecked = Vec::new();
    for (i, block) in page.split("<details>").enumerate().skip(1) {
        let body = block.split("</details>").next().unwrap_or("");
        let before = found.len();
        for line in body.lines() {
            let Some(rest) = line.trim().strip_prefix("<!-- check:") else {
                continue;
            };
            let rest = rest.trim_end_matches("-->").trim();
            let (args, expect) = rest
                .split_once("=>")
                .unwrap_or_else(|| panic!("{name}: a check without `=>`: {line}"));
            found.push(Check {
                page: name.to_string(),
                args: args.split_whitespace().map(String::from).collect(),
                expect: expect.trim().to_string(),
            });
        }
        if found.len() == before {
            unchecked.push(format!("{name}: answer {i}"));
        }
    }
    (found, unchecked)
}

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn pages() -> Vec<(String, String)> {
    let mut pages = Vec::new();
    for dir in [docs(), docs().join("en")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "md") {
                let name = path.strip_prefix(docs()).unwrap().display().to_string();
                pages.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    pages.sort();
    pages
}

#[test]
fn every_exercise_answer_is_checked_and_every_check_holds() {
    if !docs().is_dir() {
        eprintln!("SKIPPED exercises: the guide (docs/) is not next to this test binary");
        return;
    }
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    let mut all = Vec::new();
    let mut unchecked = Vec::new();
    for (name, page) in pages() {
        let (c, u) = checks(&name, &page);
        all.extend(c);
        unchecked.extend(u);
    }
    assert!(
        unchecked.is_empty(),
        "answers without a check: {unchecked:#?}"
    );
    assert!(all.len() >= 10, "only {} checks: {all:#?}", all.len());
    let mut failed = Vec::new();
    let mut ran = std::collections::BTreeMap::new();
    for c in &all {
        let output = ran.entry(c.args.clone()).or_insert_with(|| {
            let o = Command::new(&bin)
                .args(["--device", "cpu"])
                .args(&c.args)
                .env_remove("LC_ALL")
                .env_remove("LC_MESSAGES")
                .env_remove("LANG")
                .output()
                .expect("runs");
            (
                o.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
            )
        });
        if !output.0 || !output.1.contains(&c.expect) {
            failed.push(format!(
                "{}: `ferrocuda --device cpu {}` {} `{}`:\n{}",
                c.page,
                c.args.join(" "),
                if output.0 {
                    "does not print"
                } else {
                    "fails; expected"
                },
                c.expect,
                output.1
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn the_check_reader_finds_checks_and_unchecked_answers() {
    let page = "## 练习\n1. 预测\n<details><summary>答案</summary>\n\n答案是 4 倍。\n\
                <!-- check: reduce --as-printed => 1599980 -->\n</details>\n\
                2. 再预测\n<details><summary>答案</summary>\n没有检查\n</details>\n";
    let (c, u) = checks("x.md", page);
    assert_eq!(
        c,
        [Check {
            page: "x.md".into(),
            args: vec!["reduce".into(), "--as-printed".into()],
            expect: "1599980".into()
        }]
    );
    assert_eq!(u, ["x.md: answer 2"]);
}
