//! Device `printf` on the CPU device: the format is read as `vprintf` reads it on the GPU, each
//! conversion formatted by the C library's `snprintf`, and the line written to standard output
//! at once (on a GPU it appears at the next synchronisation).
use std::ffi::{CStr, c_char};
use std::io::Write;

/// The PTX ABI's `vprintf` on the CPU device: `format` a NUL-terminated C format, `args` its
/// arguments packed as `printf!` packs them (a `#[repr(C)]` struct, each field aligned to its
/// size). Returns the number of arguments.
///
/// # Safety
/// `format` is NUL-terminated and holds only the conversions `printf!` accepts; `args` holds
/// their arguments as `printf!` packs them.
pub unsafe fn vprintf(format: *const u8, args: *const u8) -> i32 {
    // SAFETY: the caller's contract.
    let format = unsafe { CStr::from_ptr(format.cast::<c_char>()) }.to_bytes();
    let mut out = Vec::with_capacity(format.len() + 16);
    let mut offset = 0usize;
    let mut count = 0;
    let mut i = 0;
    while i < format.len() {
        let c = format[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        if format.get(i + 1) == Some(&b'%') {
            out.push(b'%');
            i += 2;
            continue;
        }
        let start = i;
        i += 1;
        while i < format.len() && b"-+ #0123456789.hl".contains(&format[i]) {
            i += 1;
        }
        let Some(&conversion) = format.get(i) else {
            break;
        };
        i += 1;
        let spec = &format[start..i];
        let longs = spec.iter().filter(|&&b| b == b'l').count();
        count += 1;
        // SAFETY: each argument at its aligned offset, of the type its conversion takes.
        unsafe {
            match conversion {
                b'd' | b'i' | b'c' if longs == 0 => {
                    let v: i32 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                b'u' | b'x' | b'X' | b'o' if longs == 0 => {
                    let v: u32 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                b'd' | b'i' => {
                    let v: i64 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                b'u' | b'x' | b'X' | b'o' => {
                    let v: u64 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                b'p' => {
                    let v: *const u8 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                b's' => {
                    let v: *const c_char = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
                _ => {
                    let v: f64 = read(args, &mut offset);
                    out.extend(c_format(spec, |b, n, f| libc::snprintf(b, n, f, v)));
                }
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&out);
    let _ = stdout.flush();
    count
}

/// The next argument of type `T`, at its alignment after `offset`.
///
/// # Safety
/// `args` holds a `T` there.
unsafe fn read<T: Copy>(args: *const u8, offset: &mut usize) -> T {
    let at = offset.next_multiple_of(align_of::<T>());
    *offset = at + size_of::<T>();
    // SAFETY: the caller's contract.
    unsafe { args.add(at).cast::<T>().read_unaligned() }
}

/// One conversion formatted by `snprintf`.
fn c_format(spec: &[u8], print: impl Fn(*mut c_char, usize, *const c_char) -> i32) -> Vec<u8> {
    let mut format = spec.to_vec();
    format.push(0);
    let mut buffer = vec![0u8; 512];
    let n = print(
        buffer.as_mut_ptr().cast(),
        buffer.len(),
        format.as_ptr().cast(),
    );
    let n = usize::try_from(n).unwrap_or(0);
    if n >= buffer.len() {
        buffer.resize(n + 1, 0);
        print(
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            format.as_ptr().cast(),
        );
    }
    buffer.truncate(n);
    buffer
}
