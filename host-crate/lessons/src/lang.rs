//! The language of the lessons' output: English, or Chinese (`--lang zh`, or a `LANG` /
//! `LC_ALL` / `LC_MESSAGES` of `zh_*`). Headings, column explanations, the "what to look at"
//! line and the errors a learner can meet are printed in the chosen language; tables, kernel
//! names and numbers are the same in both.
use std::sync::atomic::{AtomicBool, Ordering};

static CHINESE: AtomicBool = AtomicBool::new(false);

/// A language of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// English (the default).
    En,
    /// 中文.
    Zh,
}

impl Lang {
    /// `en` or `zh` (`zh_CN`, `zh-TW`, `chinese`, ... count as `zh`).
    pub fn from_name(name: &str) -> Option<Lang> {
        let n = name.to_ascii_lowercase();
        if n == "en" || n.starts_with("en_") || n.starts_with("en-") || n == "c" || n == "posix" {
            Some(Lang::En)
        } else if n == "zh" || n.starts_with("zh_") || n.starts_with("zh-") || n == "chinese" {
            Some(Lang::Zh)
        } else {
            None
        }
    }

    /// The language the environment asks for: the first of `LC_ALL`, `LC_MESSAGES`, `LANG`
    /// that is set and not empty, Chinese when it starts with `zh`; English otherwise.
    pub fn from_env() -> Lang {
        for var in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let Ok(v) = std::env::var(var)
                && !v.is_empty()
            {
                return if v.to_ascii_lowercase().starts_with("zh") {
                    Lang::Zh
                } else {
                    Lang::En
                };
            }
        }
        Lang::En
    }
}

/// Chooses the language of everything printed from now on.
pub fn set(lang: Lang) {
    CHINESE.store(lang == Lang::Zh, Ordering::Relaxed);
}

/// Whether the output is Chinese.
pub fn chinese() -> bool {
    CHINESE.load(Ordering::Relaxed)
}

/// `en` or `zh`, in the chosen language.
pub fn tr<'a>(en: &'a str, zh: &'a str) -> &'a str {
    if chinese() { zh } else { en }
}

/// `format!` in the chosen language: `tf!("{n} blocks", "{n} 个线程块")`.
#[macro_export]
macro_rules! tf {
    ($en:literal, $zh:literal $(, $arg:expr)* $(,)?) => {
        if $crate::lang::chinese() {
            format!($zh $(, $arg)*)
        } else {
            format!($en $(, $arg)*)
        }
    };
}

/// `println!` of a "what to look at" line: `Look at: ...` or `看：...`.
pub fn look_at(en: &str, zh: &str) {
    if chinese() {
        println!("看：{zh}");
    } else {
        println!("Look at: {en}");
    }
}
