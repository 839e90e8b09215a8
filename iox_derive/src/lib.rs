//! # iox_derive
//!
//! `#[derive(ZeroCopySafe)]` for iox payload structs. Use it through `iox_service`,
//! which re-exports it next to the trait of the same name:
//!
//! ```
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "Pose")]
//! struct Pose {
//!     x: f64,
//!     y: f64,
//!     yaw: f32,
//! }
//!
//! assert_eq!(Pose::type_name(), "Pose");
//! ```
//!
//! The derive checks, at compile time:
//!
//! - the item is a struct (named, tuple or unit) with `#[repr(C)]` or
//!   `#[repr(transparent)]` (other modifiers such as `align(N)` or `packed` may
//!   accompany `C`), so its layout is the same in every program;
//! - every field is `ZeroCopySafe` (no `Vec`, `String`, `Box`, references or pointers);
//! - the optional `#[iox(type_name = "...")]` is non-empty printable ASCII without
//!   leading or trailing spaces, at most 255 bytes.
//!
//! It then emits `unsafe impl ::iox_service::ZeroCopySafe for Type {}`, with
//! `type_name()` returning the attribute's value when one is given. The type also
//! needs `Clone` and `Copy` (the trait's supertraits; derive them too).
//!
//! ## Type identity
//!
//! A service records its payload's name, size and alignment. Without the attribute the
//! name is `std::any::type_name` (`posepub::Pose`), so the same struct defined in two
//! programs is two payloads. With `#[iox(type_name = "Pose")]` both record `Pose` and
//! may share a service; size and alignment are still checked. Giving two types the
//! same name promises they have the same fields in the same order.
//!
//! ## Generics
//!
//! Type and const parameters are allowed; every type parameter gets a
//! `ZeroCopySafe` bound, and every field must be `ZeroCopySafe` given that bound.
//! Lifetime parameters are refused (payloads are `'static`), and so is `type_name` on
//! a generic struct: one fixed name would make every instantiation the same payload.
//!
//! ## Refused
//!
//! A struct without `repr(C)`: the Rust layout may differ between builds.
//!
//! ```compile_fail
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! struct Pose { x: f64, y: f64 }
//! ```
//!
//! A field that is not `ZeroCopySafe` (it points into the writer's heap):
//!
//! ```compile_fail,E0277
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! struct Scan { id: u64, points: &'static [f32] }
//! ```
//!
//! ```compile_fail,E0277
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone)]
//! #[repr(C)]
//! struct Scan { id: u64, points: Vec<f32> }
//! ```
//!
//! An enum: a reader cannot trust a discriminant another process wrote (an invalid one
//! is undefined behaviour). Send an integer and convert it.
//!
//! ```compile_fail
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(u8)]
//! enum Mode { Idle, Run }
//! ```
//!
//! A malformed name:
//!
//! ```compile_fail
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "")]
//! struct Pose { x: f64 }
//! ```

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, GenericParam, LitStr, parse_macro_input, parse_quote};

/// Longest `#[iox(type_name = "...")]` accepted, in bytes.
const MAX_TYPE_NAME: usize = 255;

/// Derives `iox_service::ZeroCopySafe` for a `#[repr(C)]` struct whose fields are all
/// `ZeroCopySafe`. `#[iox(type_name = "Name")]` sets the name recorded in a service's
/// static config. See the crate docs.
#[proc_macro_derive(ZeroCopySafe, attributes(iox))]
pub fn derive_zero_copy_safe(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(input).unwrap_or_else(Error::into_compile_error).into()
}

fn expand(mut input: DeriveInput) -> syn::Result<TokenStream2> {
    let fields = match &input.data {
        Data::Struct(s) => s.fields.iter().map(|f| f.ty.clone()).collect::<Vec<_>>(),
        Data::Enum(e) => {
            return Err(Error::new(
                e.enum_token.span,
                "ZeroCopySafe cannot be derived for enums: a reader cannot trust a discriminant \
                 written by another process (an invalid one is undefined behaviour); \
                 send an integer field and convert it on the reading side",
            ));
        }
        Data::Union(u) => {
            return Err(Error::new(
                u.union_token.span,
                "ZeroCopySafe cannot be derived for unions: iox cannot check which field a \
                 writer stored; use a struct",
            ));
        }
    };
    check_repr(&input)?;
    let type_name = type_name_attr(&input)?;

    for param in &input.generics.params {
        match param {
            GenericParam::Lifetime(l) => {
                return Err(Error::new(
                    l.span(),
                    "ZeroCopySafe types are 'static and hold no references: remove the lifetime parameter",
                ));
            }
            GenericParam::Type(_) | GenericParam::Const(_) => {
                if let Some((_, span)) = &type_name {
                    return Err(Error::new(
                        *span,
                        "#[iox(type_name)] cannot be used on a generic struct: every instantiation \
                         would record the same name",
                    ));
                }
            }
        }
    }
    // Every type parameter must itself be ZeroCopySafe.
    for param in input.generics.type_params_mut() {
        param.bounds.push(parse_quote!(::iox_service::ZeroCopySafe));
    }

    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    // One call per field, spanned at the field's type, so an error names the field.
    let field_checks = fields.iter().map(|ty| {
        quote_spanned! {ty.span()=>
            __iox_assert_zero_copy_safe::<#ty>();
        }
    });
    let name_fn = type_name.map(|(name, _)| {
        quote! {
            fn type_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#name)
            }
        }
    });
    Ok(quote! {
        // Compiles only if every field is ZeroCopySafe (given ZeroCopySafe type parameters).
        const _: () = {
            #[allow(dead_code)]
            fn __iox_assert_zero_copy_safe<T: ?Sized + ::iox_service::ZeroCopySafe>() {}
            #[allow(dead_code)]
            fn __iox_check_fields #impl_generics () #where_clause {
                #(#field_checks)*
            }
        };
        // SAFETY: the struct is repr(C) or repr(transparent) (layout fixed by its fields)
        // and every field is ZeroCopySafe (checked just above).
        #[automatically_derived]
        unsafe impl #impl_generics ::iox_service::ZeroCopySafe for #ident #ty_generics #where_clause {
            #name_fn
        }
    })
}

/// Requires `repr(C)` or `repr(transparent)` among the struct's repr attributes.
fn check_repr(input: &DeriveInput) -> syn::Result<()> {
    let mut stable = false;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                stable = true;
            }
            // Skip the arguments of align(N) / packed(N).
            if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                content.parse::<TokenStream2>()?;
            }
            Ok(())
        })?;
    }
    if stable {
        Ok(())
    } else {
        Err(Error::new(
            input.ident.span(),
            "ZeroCopySafe needs #[repr(C)] (or #[repr(transparent)]) on the struct: \
             the default Rust layout may differ between the programs sharing it",
        ))
    }
}

/// The validated value of `#[iox(type_name = "...")]`, if given, with its span.
fn type_name_attr(input: &DeriveInput) -> syn::Result<Option<(LitStr, Span)>> {
    let mut found: Option<(LitStr, Span)> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("iox")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("type_name") {
                return Err(meta.error("unknown iox attribute; expected `type_name = \"...\"`"));
            }
            let lit: LitStr = meta.value()?.parse()?;
            if found.is_some() {
                return Err(Error::new(lit.span(), "type_name is given twice"));
            }
            check_type_name(&lit)?;
            let span = lit.span();
            found = Some((lit, span));
            Ok(())
        })?;
    }
    Ok(found)
}

fn check_type_name(lit: &LitStr) -> syn::Result<()> {
    let name = lit.value();
    let err = |msg: String| Err(Error::new(lit.span(), msg));
    if name.is_empty() {
        return err("type_name must not be empty".into());
    }
    if let Some(c) = name.chars().find(|c| !(' '..='~').contains(c)) {
        return err(format!(
            "type_name must be printable ASCII (space to `~`); it contains {c:?}"
        ));
    }
    if name.trim() != name {
        return err("type_name must not start or end with a space".into());
    }
    if name.len() > MAX_TYPE_NAME {
        return err(format!(
            "type_name is {} bytes long; at most {MAX_TYPE_NAME} are allowed",
            name.len()
        ));
    }
    Ok(())
}
