//! `#[kernel]`: a kernel's parameters are declared once, in the kernel crate, and both sides are
//! generated from that declaration.
//!
//! ```ignore
//! /// `reduceNeighbored` (《CUDA C编程权威指南》3.4) ...
//! /// # Launch ...
//! /// # Safety ...
//! #[kernel(T in [i32, f32])]
//! pub unsafe fn reduce_neighbored<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
//!     unsafe { neighbored(g_idata, g_odata, n) }
//! }
//! ```
//!
//! On `nvptx64` this is the generic function plus one `#[no_mangle] extern "ptx-kernel"` entry
//! point per instance, named after the kernel and its parameters: `reduce_neighbored_i32`,
//! `reduce_neighbored_f32` (a const parameter `BLOCK = 512` adds `_b512`, `R = 3` adds `_r3`;
//! then each type parameter adds its value in lower case, `O = Sum` `_sum`, `T = f32` `_f32`;
//! each group in the order the parameters are declared).
//!
//! On the host the body is dropped (it is device code) and the same name is a function that
//! returns the kernel's typed handle, `ferrocuda_device::entry::Entry<(*mut T, *mut T, usize)>`:
//! `reduce_neighbored::<f32>()` (`Option`, `None` for a type without an instance; const
//! parameters become arguments, `reduce_complete_unroll::<f32>(512)`). A launch through the handle
//! takes exactly those argument types, so a wrong count or type is a compile error. Every
//! instance is also registered in `ferrocuda_device::entry::ENTRY_POINTS`, the one list the
//! PTX test, the sanitizer and `ferrocuda occupancy` walk.
//!
//! `cluster = EXPR` makes it a thread block cluster kernel: the launch groups the blocks along x
//! in clusters of `EXPR` (a `u32` expression of the const parameters) with `cuLaunchKernelEx`, and
//! the kernel may use distributed shared memory (`ferrocuda_device::cluster`). Such a kernel needs
//! sm_90: its entry points exist only in the PTX of sm_90 and newer. `arch = 90` says the same
//! of a kernel that needs sm_90 for another reason (bulk copies); the host refuses it, by name,
//! on an older GPU.
//!
//! `dynamic_shared = EXPR` declares the dynamic shared memory a launch needs, in bytes, as a
//! `usize` expression of `block` (threads per block, `usize`), the type parameters and the const
//! parameters; the host launches with it and refuses a launch that gives less.
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::visit_mut::VisitMut;
use syn::{
    Expr, FnArg, GenericParam, Ident, ItemFn, Pat, Token, Type, bracketed, parse_macro_input,
};

/// One `NAME in [..]`, `dynamic_shared = EXPR`, `cluster = EXPR` or `arch = N` of the
/// attribute.
enum Arg {
    Instances(Ident, Vec<TokenStream2>),
    DynamicShared(Expr),
    Cluster(Expr),
    Arch(syn::LitInt),
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        if input.peek(Token![in]) {
            input.parse::<Token![in]>()?;
            let content;
            bracketed!(content in input);
            let values = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
            Ok(Arg::Instances(
                name,
                values.into_iter().map(|v| v.into_token_stream()).collect(),
            ))
        } else if name == "dynamic_shared" {
            input.parse::<Token![=]>()?;
            Ok(Arg::DynamicShared(input.parse()?))
        } else if name == "cluster" {
            input.parse::<Token![=]>()?;
            Ok(Arg::Cluster(input.parse()?))
        } else if name == "arch" {
            input.parse::<Token![=]>()?;
            Ok(Arg::Arch(input.parse()?))
        } else {
            Err(syn::Error::new(
                name.span(),
                "expected `PARAM in [..]`, `dynamic_shared = EXPR`, `cluster = EXPR` or `arch = N`",
            ))
        }
    }
}

/// A generic parameter of the kernel and the values it is instantiated with.
struct Param {
    ident: Ident,
    is_const: bool,
    const_ty: Option<Type>,
    values: Vec<TokenStream2>,
}

/// Replaces each generic parameter by its value of one instance.
struct Substitute<'a>(&'a [(Ident, TokenStream2)]);

impl VisitMut for Substitute<'_> {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::Path(p) = ty
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
            && let Some((_, v)) = self.0.iter().find(|(n, _)| n == id)
        {
            *ty = syn::parse2(v.clone()).expect("a type parameter's value is a type");
            return;
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Path(p) = e
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
            && let Some((_, v)) = self.0.iter().find(|(n, _)| n == id)
        {
            *e = syn::parse2(quote!({ #v })).expect("a const parameter's value is an expression");
            return;
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
}

/// The suffix an instance adds to the kernel's name: `_b512` for `BLOCK = 512`, `_f32` for
/// `T = f32`; const parameters first, then types, each in declaration order.
fn suffix(params: &[Param], values: &[TokenStream2]) -> String {
    let mut consts = String::new();
    let mut types = String::new();
    for (p, v) in params.iter().zip(values) {
        let v = v.to_string().replace(' ', "");
        if p.is_const {
            let first = p
                .ident
                .to_string()
                .chars()
                .next()
                .unwrap()
                .to_ascii_lowercase();
            consts += &format!("_{first}{v}");
        } else {
            types += &format!("_{}", v.to_lowercase());
        }
    }
    consts + &types
}

/// Tokens as a person writes them: `*const f32`, `Coefficients<f32>`.
fn readable(tokens: TokenStream2) -> String {
    tokens
        .to_string()
        .replace("* ", "*")
        .replace(" <", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
}

fn cartesian(params: &[Param]) -> Vec<Vec<TokenStream2>> {
    params.iter().fold(vec![Vec::new()], |acc, p| {
        acc.iter()
            .flat_map(|prefix| {
                p.values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect()
    })
}

/// Declares a GPU kernel; see the crate documentation.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(attr with Punctuated::<Arg, Token![,]>::parse_terminated);
    let func = parse_macro_input!(item as ItemFn);
    match expand(args, func) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(args: Punctuated<Arg, Token![,]>, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    let name = &sig.ident;
    if sig.unsafety.is_none() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            "a kernel is an `unsafe fn`: its launch contract is its `# Safety` section",
        ));
    }
    if !matches!(sig.output, syn::ReturnType::Default) {
        return Err(syn::Error::new_spanned(
            &sig.output,
            "a kernel returns nothing",
        ));
    }
    let mut shared = None;
    let mut cluster = None;
    let mut arch = None;
    let mut lists = Vec::new();
    for a in args {
        match a {
            Arg::Instances(id, values) => lists.push((id, values)),
            Arg::DynamicShared(e) => shared = Some(e),
            Arg::Cluster(e) => cluster = Some(e),
            Arg::Arch(n) => arch = Some(n.base10_parse::<u32>()?),
        }
    }
    // Clusters exist from sm_90 on.
    let min_arch = match (arch, &cluster) {
        (Some(a), Some(_)) => a.max(90),
        (Some(a), None) => a,
        (None, Some(_)) => 90,
        (None, None) => 0,
    };
    let arch_cfg = if min_arch > 0 {
        let feature = format!("sm_{min_arch}");
        quote!(#[cfg(target_feature = #feature)])
    } else {
        quote!()
    };
    let mut params = Vec::new();
    for g in &sig.generics.params {
        let (ident, is_const, const_ty) = match g {
            GenericParam::Type(t) => (t.ident.clone(), false, None),
            GenericParam::Const(c) => (c.ident.clone(), true, Some(c.ty.clone())),
            GenericParam::Lifetime(l) => {
                return Err(syn::Error::new_spanned(
                    l,
                    "a kernel has no lifetime parameters",
                ));
            }
        };
        let Some(pos) = lists.iter().position(|(n, _)| *n == ident) else {
            return Err(syn::Error::new_spanned(
                g,
                format!("say which values `{ident}` takes: `#[kernel({ident} in [..])]`"),
            ));
        };
        let values = lists.remove(pos).1;
        params.push(Param {
            ident,
            is_const,
            const_ty,
            values,
        });
    }
    if let Some((id, _)) = lists.first() {
        return Err(syn::Error::new_spanned(
            id,
            format!("`{id}` is not a parameter of the kernel"),
        ));
    }

    let mut arg_names = Vec::new();
    let mut arg_types = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new_spanned(input, "a kernel takes no `self`"));
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new_spanned(
                &pt.pat,
                "name each kernel parameter",
            ));
        };
        arg_names.push(pi.ident.clone());
        arg_types.push((*pt.ty).clone());
    }

    let docs: Vec<_> = func
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let other_attrs: Vec<_> = func
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    let vis = &func.vis;
    let body = &func.block;
    let krate = quote!(::ferrocuda_device::entry);

    let instances = cartesian(&params);
    let mut device = Vec::new();
    // On the host the body is compiled too, under another name, for the CPU device.
    let cpu_body = format_ident!("__ferrocuda_cpu_{}", name);
    let mut cpu = Vec::new();
    {
        let generics = &sig.generics;
        let where_clause = &generics.where_clause;
        let inputs = &sig.inputs;
        cpu.push(quote! {
            #[doc(hidden)]
            #(#other_attrs)*
            #[allow(clippy::missing_safety_doc, dead_code)]
            #[inline]
            #vis unsafe fn #cpu_body #generics (#inputs) #where_clause #body
        });
    }
    let mut host_checks = TokenStream2::new();
    let mut registry = Vec::new();
    let generic = !params.is_empty();

    if generic {
        let generics = &sig.generics;
        let where_clause = &generics.where_clause;
        let inputs = &sig.inputs;
        device.push(quote! {
            #(#docs)*
            #(#other_attrs)*
            #arch_cfg
            #[inline(always)]
            #vis unsafe fn #name #generics (#inputs) #where_clause #body
        });
    } else {
        let inputs = &sig.inputs;
        device.push(quote! {
            #(#docs)*
            #(#other_attrs)*
            #arch_cfg
            #[unsafe(no_mangle)]
            #vis unsafe extern "ptx-kernel" fn #name(#inputs) #body
        });
    }

    for (i, values) in instances.iter().enumerate() {
        let symbol = format!("{name}{}", suffix(&params, values));
        let subst: Vec<(Ident, TokenStream2)> = params
            .iter()
            .map(|p| p.ident.clone())
            .zip(values.iter().cloned())
            .collect();
        let types: Vec<Type> = arg_types
            .iter()
            .map(|t| {
                let mut t = t.clone();
                Substitute(&subst).visit_type_mut(&mut t);
                t
            })
            .collect();
        let type_names: Vec<String> = types
            .iter()
            .map(|t| readable(t.to_token_stream()))
            .collect();
        if generic {
            let entry = Ident::new(&symbol, name.span());
            let doc = format!(
                "`{name}` for {}: see the generic function.",
                subst
                    .iter()
                    .map(|(n, v)| format!("`{n} = {}`", v.to_string().replace(' ', "")))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            device.push(quote! {
                #[doc = #doc]
                ///
                /// # Safety
                /// As the generic function.
                #arch_cfg
                #[unsafe(no_mangle)]
                pub unsafe extern "ptx-kernel" fn #entry(#(#arg_names: #types),*) {
                    // SAFETY: forwarded to the launcher.
                    unsafe { #name::<#(#values),*>(#(#arg_names),*) }
                }
            });
        }
        let aliases: Vec<TokenStream2> = params
            .iter()
            .zip(values)
            .map(|(p, v)| {
                let id = &p.ident;
                match &p.const_ty {
                    Some(ty) => {
                        quote!(#[allow(non_upper_case_globals, dead_code)] const #id: #ty = #v;)
                    }
                    None => quote!(#[allow(dead_code)] type #id = #v;),
                }
            })
            .collect();
        let cluster_blocks = match &cluster {
            None => quote!(0),
            Some(e) => quote!({
                #(#aliases)*
                (#e) as u32
            }),
        };
        let shared_fn = match &shared {
            None => quote!(None),
            Some(e) => {
                quote!(Some({
                    fn dynamic_shared_bytes(block: u32) -> usize {
                        #(#aliases)*
                        let block = block as usize;
                        #e
                    }
                    dynamic_shared_bytes
                }))
            }
        };
        let stat = format_ident!(
            "__FERROCUDA_ENTRY_{}_{}",
            name.to_string().to_uppercase(),
            i
        );
        let cpu_launch = format_ident!("__ferrocuda_cpu_launch_{}", symbol);
        let arg_index: Vec<usize> = (0..arg_names.len()).collect();
        let turbofish = if generic {
            quote!(::<#(#values),*>)
        } else {
            quote!()
        };
        cpu.push(quote! {
            /// Runs this instance on the CPU device: `params` is the launch's array of pointers
            /// to the arguments, as `cuLaunchKernel` takes it.
            #[doc(hidden)]
            #[allow(non_snake_case, clippy::missing_safety_doc)]
            unsafe fn #cpu_launch(
                params: *const *const ::core::ffi::c_void,
                launch: &::ferrocuda_device::cpu::Launch,
            ) -> ::core::result::Result<::ferrocuda_device::cpu::Outcome, ::ferrocuda_device::cpu::Fault> {
                // SAFETY: the driver passes one pointer per parameter, each to a value of the
                // parameter's type (the typed launch checked them).
                #(let #arg_names: #types = unsafe { (*params.add(#arg_index)).cast::<#types>().read_unaligned() };)*
                ::ferrocuda_device::cpu::run(launch, &|| {
                    // SAFETY: the launch contract of the kernel, which its caller upheld.
                    unsafe { #cpu_body #turbofish (#(#arg_names),*) }
                })
            }
        });
        let value_strings: Vec<String> = values
            .iter()
            .map(|v| v.to_string().replace(' ', ""))
            .collect();
        let param_names: Vec<String> = params.iter().map(|p| p.ident.to_string()).collect();
        // A kernel that takes the grid barrier needs a cooperative launch.
        let cooperative = type_names
            .iter()
            .any(|t| t.rsplit("::").next() == Some("GridBarrier"));
        registry.push(quote! {
            #[#krate::__private::linkme::distributed_slice(#krate::ENTRY_POINTS)]
            #[linkme(crate = #krate::__private::linkme)]
            #[doc(hidden)]
            static #stat: #krate::EntryInfo = #krate::EntryInfo {
                package: env!("CARGO_PKG_NAME"),
                module: module_path!(),
                kernel: stringify!(#name),
                symbol: #symbol,
                instance: &[#((#param_names, #value_strings)),*],
                params: &[#(#type_names),*],
                cooperative: #cooperative,
                dynamic_shared_bytes: #shared_fn,
                cluster_blocks: #cluster_blocks,
                min_arch: #min_arch,
                cpu: #cpu_launch,
            };
        });
        if generic {
            let conds = params.iter().zip(values).map(|(p, v)| {
                let id = &p.ident;
                if p.is_const {
                    let arg = Ident::new(&id.to_string().to_lowercase(), Span::call_site());
                    quote!(#arg == #v)
                } else {
                    quote!(::core::any::TypeId::of::<#id>() == ::core::any::TypeId::of::<#v>())
                }
            });
            host_checks.extend(quote! {
                if true #(&& #conds)* {
                    // SAFETY: the instance's parameter types are `Args` with the parameters
                    // replaced by the values just compared.
                    return Some(unsafe { #krate::Entry::from_info(&#stat) });
                }
            });
        } else {
            host_checks.extend(quote! {
                // SAFETY: the parameter types of the declaration.
                unsafe { #krate::Entry::from_info(&#stat) }
            });
        }
    }

    let args_ty = quote!((#(#arg_types,)*));
    let host = if generic {
        let type_params = params.iter().filter(|p| !p.is_const).map(|p| &p.ident);
        let const_args = params.iter().filter(|p| p.is_const).map(|p| {
            let arg = Ident::new(&p.ident.to_string().to_lowercase(), Span::call_site());
            let ty = p.const_ty.as_ref().unwrap();
            quote!(#arg: #ty)
        });
        let note = format!(
            "\n\n**Host:** the typed handle of the `{name}_*` entry points, or `None` for \
             parameters without an instance."
        );
        quote! {
            #(#docs)*
            #[doc = #note]
            #[allow(clippy::type_complexity)]
            #vis fn #name<#(#type_params: 'static),*>(#(#const_args),*) -> Option<#krate::Entry<#args_ty>> {
                #host_checks
                None
            }
        }
    } else {
        let note = format!("\n\n**Host:** the typed handle of the entry point `{name}`.");
        quote! {
            #(#docs)*
            #[doc = #note]
            #vis fn #name() -> #krate::Entry<#args_ty> {
                #host_checks
            }
        }
    };

    Ok(quote! {
        #(#[cfg(target_arch = "nvptx64")] #device)*
        #[cfg(not(target_arch = "nvptx64"))]
        #host
        #(#[cfg(not(target_arch = "nvptx64"))] #registry)*
        #(#[cfg(not(target_arch = "nvptx64"))] #cpu)*
    })
}

/// Device `printf` (CUDA's `printf`, through the PTX ABI's `vprintf`): a C format string and
/// its arguments, checked at compile time. Each conversion fixes its argument's type, and a
/// wrong count or type does not compile:
///
/// | conversion | argument |
/// |---|---|
/// | `%d %i %c` (also with `h`) | `i32` |
/// | `%u %x %X %o` (also with `h`) | `u32` |
/// | `%ld %lld %li %lli` | `i64` |
/// | `%lu %llu %lx %llx %lX %llX %lo %llo` | `u64` |
/// | `%f %e %E %g %G %a %A` | anything `Into<f64>` (`f32` is promoted, as C does) |
/// | `%p` | a raw pointer (its value is printed, nothing is read) |
/// | `%s` | `&core::ffi::CStr` (a `c"..."` literal: NUL-terminated, in global memory) |
///
/// These are the conversions and sizes CUDA's programming guide lists for device `printf`
/// (`hh`, `z` and `F` are not among them: the device does not size their arguments). Flags, a
/// fixed width and a fixed precision are allowed; `*` (a width or precision taken from an
/// argument) is not; at most 32 arguments, as CUDA prints. The arguments are packed as `vprintf` reads them: a `#[repr(C)]` struct,
/// each field aligned to its own size.
///
/// ```ignore
/// ferrocuda_device::printf!("block %u thread %u\n", block_idx_x(), thread_idx_x());
/// ```
#[proc_macro]
pub fn printf(input: TokenStream) -> TokenStream {
    expand_printf(input, false)
}

/// `printf!` with a newline appended to the format.
#[proc_macro]
pub fn println(input: TokenStream) -> TokenStream {
    expand_printf(input, true)
}

/// The type a conversion takes, as the expansion binds it.
enum PrintfArg {
    Ty(proc_macro2::TokenStream),
    Float,
    Pointer,
    /// `%s`: a `&CStr`, passed as its pointer.
    Str,
}

/// The characters at the front of `chars` that `keep` accepts, taken off it.
fn take_run(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    keep: impl Fn(char) -> bool,
) -> String {
    let mut taken = String::new();
    while let Some(c) = chars.next_if(|&c| keep(c)) {
        taken.push(c);
    }
    taken
}

/// Parses the conversions of a C format string.
fn printf_conversions(format: &str) -> Result<Vec<PrintfArg>, String> {
    let mut args = Vec::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        if chars.next_if_eq(&'%').is_some() {
            continue;
        }
        // Flags, then a fixed width and precision, then the size: each a run of characters.
        let flags = take_run(&mut chars, |c| "-+ #0".contains(c));
        let width = take_run(&mut chars, |c| c.is_ascii_digit() || c == '.');
        let mut spec = format!("%{flags}{width}");
        if chars.peek() == Some(&'*') {
            return Err(format!(
                "`{spec}*`: a width or precision from an argument is not supported; write it in the format"
            ));
        }
        let length = take_run(&mut chars, |c| "hl".contains(c));
        let Some(conversion) = chars.next() else {
            return Err(format!(
                "`{spec}{length}` ends the format without a conversion"
            ));
        };
        spec.push_str(&length);
        spec.push(conversion);
        let ty = |t: &str| PrintfArg::Ty(t.parse().expect("a type"));
        let arg = match (length.as_str(), conversion) {
            ("" | "h", 'd' | 'i' | 'c') => ty("i32"),
            ("" | "h", 'u' | 'x' | 'X' | 'o') => ty("u32"),
            ("l" | "ll", 'd' | 'i') => ty("i64"),
            ("l" | "ll", 'u' | 'x' | 'X' | 'o') => ty("u64"),
            ("", 'f' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A') => PrintfArg::Float,
            ("", 'p') => PrintfArg::Pointer,
            ("", 's') => PrintfArg::Str,
            _ => return Err(format!("unsupported conversion `{spec}`")),
        };
        args.push(arg);
    }
    Ok(args)
}

fn expand_printf(input: TokenStream, newline: bool) -> TokenStream {
    use syn::parse::Parser;
    let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
    let exprs = match parser.parse(input) {
        Ok(e) => e.into_iter().collect::<Vec<_>>(),
        Err(e) => return e.to_compile_error().into(),
    };
    let Some((first, args)) = exprs.split_first() else {
        return quote::quote!(compile_error!("printf! needs a format string")).into();
    };
    let format = match first {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => s.clone(),
        other => {
            return syn::Error::new_spanned(other, "printf!'s format must be a string literal")
                .to_compile_error()
                .into();
        }
    };
    let conversions = match printf_conversions(&format.value()) {
        Ok(c) => c,
        Err(e) => {
            return syn::Error::new_spanned(&format, e)
                .to_compile_error()
                .into();
        }
    };
    if args.len() > 32 {
        return syn::Error::new_spanned(
            &format,
            format!("{} arguments; device printf takes at most 32", args.len()),
        )
        .to_compile_error()
        .into();
    }
    if conversions.len() != args.len() {
        return syn::Error::new_spanned(
            &format,
            format!(
                "the format has {} conversion(s) but {} argument(s) follow",
                conversions.len(),
                args.len()
            ),
        )
        .to_compile_error()
        .into();
    }
    let text = format!("{}{}\0", format.value(), if newline { "\n" } else { "" });
    let text = syn::LitStr::new(&text, format.span());
    let names: Vec<_> = (0..args.len())
        .map(|i| quote::format_ident!("__printf_arg{}", i))
        .collect();
    let mut lets = Vec::new();
    let mut fields = Vec::new();
    for ((conversion, arg), name) in conversions.iter().zip(args).zip(&names) {
        match conversion {
            PrintfArg::Ty(t) => {
                lets.push(
                    quote::quote_spanned!(syn::spanned::Spanned::span(arg)=> let #name: #t = #arg;),
                );
                fields.push(t.clone());
            }
            PrintfArg::Float => {
                lets.push(quote::quote_spanned!(syn::spanned::Spanned::span(arg)=>
                    let #name: f64 = ::core::convert::Into::<f64>::into(#arg);));
                fields.push(quote::quote!(f64));
            }
            PrintfArg::Str => {
                lets.push(quote::quote_spanned!(syn::spanned::Spanned::span(arg)=>
                    let #name: *const u8 = {
                        let s: &::core::ffi::CStr = #arg;
                        s.as_ptr().cast::<u8>()
                    };));
                fields.push(quote::quote!(*const u8));
            }
            PrintfArg::Pointer => {
                lets.push(quote::quote_spanned!(syn::spanned::Spanned::span(arg)=>
                    let #name: *const u8 = (#arg) as *const u8;));
                fields.push(quote::quote!(*const u8));
            }
        }
    }
    quote::quote!({
        #(#lets)*
        #[repr(C)]
        struct __PrintfArgs(#(#fields,)* u8);
        let __printf_args = __PrintfArgs(#(#names,)* 0);
        // SAFETY: a NUL-terminated format in global memory, and the arguments packed as its
        // conversions read them (checked above).
        unsafe {
            ::ferrocuda_device::print::vprintf(
                #text.as_ptr(),
                (&__printf_args as *const __PrintfArgs).cast::<u8>(),
            )
        }
    })
    .into()
}

#[cfg(test)]
mod printf_tests {
    use super::{PrintfArg, printf_conversions};

    fn kinds(format: &str) -> Result<Vec<String>, String> {
        printf_conversions(format).map(|args| {
            args.iter()
                .map(|a| match a {
                    PrintfArg::Ty(t) => t.to_string(),
                    PrintfArg::Float => "f64".into(),
                    PrintfArg::Pointer => "ptr".into(),
                    PrintfArg::Str => "cstr".into(),
                })
                .collect()
        })
    }

    #[test]
    fn each_documented_conversion_fixes_its_argument_type() {
        assert_eq!(
            kinds("%d %5u %-08x %lld %llu %.3f %e %p %s %hd %c 100%%").unwrap(),
            [
                "i32", "u32", "u32", "i64", "u64", "f64", "f64", "ptr", "cstr", "i32", "i32"
            ]
        );
        assert_eq!(
            kinds("no conversions, 50%% off").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn undocumented_sizes_star_widths_and_a_dangling_percent_are_refused() {
        for bad in [
            "%zu",
            "%hhd",
            "%F",
            "%*d",
            "%.*f",
            "%q",
            "ends with %",
            "%Lf",
        ] {
            assert!(kinds(bad).is_err(), "{bad} was accepted");
        }
    }
}
