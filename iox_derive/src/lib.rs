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
//!     seq: u32,
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
//!   leading or trailing spaces, at most 255 bytes, not starting with `[` or `(`, and
//!   not a primitive type's name (`bool`, `u8`, ...): those are the names iox gives
//!   arrays, tuples and built-in types. Paths such as `geometry_msgs::Pose` or
//!   `geometry_msgs/msg/Pose` are fine (see "Type identity" for why a path Rust also
//!   gives an unnamed type is);
//! - a struct with `#[iox(type_name = "...")]` has only fields valid for every bit
//!   pattern (no `bool`, nothing containing one) and no padding (see below).
//!
//! It then emits `unsafe impl ::iox_service::ZeroCopySafe for Type { .. }`, with
//! what a reader checks (a struct holding a `bool`, directly or in a nested struct or
//! array, has each such field checked when a sample is received: another process may
//! have written any byte there, and a `bool` other than 0 or 1 is refused, not read),
//! `type_name()` returning the attribute's value when one is given, and `schema()`
//! describing every field (name, `offset_of!`, the field type's own schema): the
//! layout a publish-subscribe service records, so `iox echo` prints samples with field
//! names and an opener whose type has other fields is told which one differs. The type also
//! needs `Clone` and `Copy` (the trait's supertraits; derive them too).
//!
//! ## Type identity
//!
//! A service records its payload's name, size and alignment. Without the attribute the
//! name is `std::any::type_name` (`posepub::Pose`), so the same struct defined in two
//! programs is two payloads; a service is shared by one type, compiled into each
//! program from the same source. With `#[iox(type_name = "Pose")]` both programs'
//! `Pose` record `Pose` and may share a service; size and alignment are still checked,
//! and so are the fields when both sides have a schema (the derive writes one), but a
//! service recorded without one (an older iox, a binding that knows no layout) is not
//! compared field by field. So a reader's `Pose` may be handed bytes another program
//! wrote as its own `Pose`, and that must never be undefined behaviour: a named type must accept
//! every bit pattern (use a `u8` for a flag, not a `bool`; an integer, not an enum) and
//! have no padding, whose bytes are uninitialised (add explicit fields such as
//! `_pad: [u8; 4]`). The derive checks both at compile time. Two types given the same
//! name should still have the same fields in the same order: otherwise the values are
//! garbage, though no longer unsound.
//!
//! A name may be a path, as another language or a schema registry writes it
//! (`geometry_msgs::Pose`), even the path `std::any::type_name` gives some unnamed Rust
//! type: the identity also records whether every bit pattern is a value, which a named
//! type always says and a type holding a `bool` or padding never does, so the two never
//! share a service; an unnamed type that also accepts every bit pattern may, with the
//! same size, alignment and fields (both are safe to read from any bytes).
//!
//! ```
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "Status")]
//! struct Status {
//!     flag: u8,      // 0 or 1, not a bool
//!     _pad: [u8; 7], // what repr(C) would insert before `time`, now initialised data
//!     time: u64,
//! }
//! assert_eq!(size_of::<Status>(), 16);
//! ```
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
//!
//! A name Rust gives a built-in type (a service carrying `bool` must not be opened with
//! a struct of one `u8`):
//!
//! ```compile_fail
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "bool")]
//! struct NotBool(u8);
//! ```
//!
//! A named type with a `bool` field (a reader of another program's `Status` might find
//! a 2 there), or any field that is not valid for every bit pattern:
//!
//! ```compile_fail,E0080
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "Status")]
//! struct Status { time: u64, flag: bool, _pad: [u8; 7] }
//! ```
//!
//! A named type with padding (7 uninitialised bytes after `flag`, which another
//! program's `Status` might read as a field):
//!
//! ```compile_fail,E0080
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! #[iox(type_name = "Status")]
//! struct Status { flag: u8, time: u64 }
//! ```
//!
//! Without the attribute both are fine: the type is only ever read as itself.
//!
//! ```
//! use iox_service::ZeroCopySafe;
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! struct Status { flag: bool, time: u64 }
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
    // (type, name for messages: the ident, or the index of a tuple field)
    let fields = match &input.data {
        Data::Struct(s) => s
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let name = f
                    .ident
                    .as_ref()
                    .map_or_else(|| i.to_string(), ToString::to_string);
                (f.ty.clone(), name)
            })
            .collect::<Vec<_>>(),
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
    let field_members = match &input.data {
        Data::Struct(s) => s.fields.iter().map(|f| f.ident.clone()).collect::<Vec<_>>(),
        _ => Vec::new(),
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
    let field_checks = fields.iter().map(|(ty, _)| {
        quote_spanned! {ty.span()=>
            __iox_assert_zero_copy_safe::<#ty>();
        }
    });
    let types = fields.iter().map(|(ty, _)| ty).collect::<Vec<_>>();
    // Every field valid for every bit pattern, and no padding: the fields' sizes add up
    // to the struct's. Written without `0 +` or `true &&` (clippy would flag them at the
    // user's spans).
    let fields_size = if types.is_empty() {
        quote!(0)
    } else {
        quote!(#(::core::mem::size_of::<#types>())+*)
    };
    let fields_any_bit_pattern = types
        .iter()
        .map(|ty| quote!(<#ty as ::iox_service::ZeroCopySafe>::ANY_BIT_PATTERN && ));
    let any_bit_pattern = quote! {
        #(#fields_any_bit_pattern)* ::core::mem::size_of::<Self>() == #fields_size
    };
    // A stable name requires ANY_BIT_PATTERN (a type is never generic here): one
    // assertion per field, spanned at it, and one for padding, each saying what to do.
    let stable_name_checks = type_name.as_ref().map(|(name, span)| {
        let name = name.value();
        let per_field = fields.iter().map(|(ty, field)| {
            let msg = format!(
                "#[iox(type_name = \"{name}\")]: field `{field}` of `{ident}` (type `{}`) is not \
                 valid for every bit pattern, or has padding; a type with a stable name may be \
                 read by another program's type of that name, so every byte must be initialised \
                 data that any value is valid for: use a `u8` (0 or 1) instead of a `bool` for \
                 a flag and an integer instead of an enum, and give nested structs explicit \
                 padding fields (`_pad: [u8; N]`)",
                type_text(ty)
            );
            let msg = escape_braces(&msg);
            quote_spanned! {ty.span()=>
                const _: () = ::core::assert!(
                    <#ty as ::iox_service::ZeroCopySafe>::ANY_BIT_PATTERN,
                    #msg
                );
            }
        });
        let msg = format!(
            "#[iox(type_name = \"{name}\")]: `{ident}` has padding (its size is larger than \
             the sum of its fields' sizes); padding bytes are uninitialised, and another \
             program's type of the same name may read them as a field; add the padding as \
             explicit fields (for example `_pad: [u8; 7]` between a `u8` and a `u64`; with \
             the fields ordered largest first it is only needed at the end)"
        );
        let msg = escape_braces(&msg);
        quote_spanned! {*span=>
            #(#per_field)*
            const _: () = ::core::assert!(
                ::core::mem::size_of::<#ident>() == #fields_size,
                #msg
            );
        }
    });
    // Each field as a member expression: its name, or a tuple struct's index.
    let members: Vec<TokenStream2> = field_members
        .iter()
        .enumerate()
        .map(|(i, m)| match m {
            Some(ident) => quote!(#ident),
            None => {
                let index = syn::Index::from(i);
                quote!(#index)
            }
        })
        .collect();
    // The schema: each field's name, `offset_of!` and own schema.
    let schema_fields = fields.iter().zip(&members).map(|((ty, name), member)| {
        quote! {
            ::iox_service::schema::Field {
                name: ::std::string::String::from(#name),
                offset: ::core::mem::offset_of!(Self, #member) as u64,
                schema: <#ty as ::iox_service::ZeroCopySafe>::schema(),
            }
        }
    });
    let schema_fn = quote! {
        fn schema() -> ::iox_service::Schema {
            ::iox_service::Schema::Struct {
                name: <Self as ::iox_service::ZeroCopySafe>::type_name().into_owned(),
                size: ::core::mem::size_of::<Self>() as u64,
                alignment: ::core::mem::align_of::<Self>() as u64,
                fields: ::std::vec![#(#schema_fields),*],
            }
        }
    };
    // What a reader checks (see `ZeroCopySafe`'s hidden `CHECK_ON_READ`): every field
    // whose type has bytes that are no value, each read in place through a raw pointer
    // (never a reference to a value not yet checked). Written without `false ||` or
    // `true &&`, as above.
    let check_on_read = if types.is_empty() {
        quote!(false)
    } else {
        let each = types
            .iter()
            .map(|ty| quote!(<#ty as ::iox_service::ZeroCopySafe>::CHECK_ON_READ));
        quote!(#(#each)||*)
    };
    let field_checks_on_read = fields.iter().zip(&members).map(|((ty, _), member)| {
        quote! {
            (!<#ty as ::iox_service::ZeroCopySafe>::CHECK_ON_READ
                || unsafe { <#ty as ::iox_service::ZeroCopySafe>::is_valid(::core::ptr::addr_of!((*ptr).#member)) })
        }
    });
    let is_valid_body = if fields.is_empty() {
        quote!(true)
    } else {
        quote!(#(#field_checks_on_read)&&*)
    };
    let is_valid_fn = quote! {
        #[inline]
        unsafe fn is_valid(ptr: *const Self) -> bool {
            #is_valid_body
        }
    };
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
        #stable_name_checks
        // SAFETY: the struct is repr(C) or repr(transparent) (layout fixed by its fields)
        // and every field is ZeroCopySafe (checked just above). ANY_BIT_PATTERN is computed
        // from the fields and the size, and a stable name requires it (asserted above).
        // CHECK_ON_READ holds if any field's does, and is_valid asks each such field at
        // its place (the caller vouches for the value's bytes; each field is inside it).
        #[automatically_derived]
        unsafe impl #impl_generics ::iox_service::ZeroCopySafe for #ident #ty_generics #where_clause {
            const ANY_BIT_PATTERN: bool = #any_bit_pattern;
            const CHECK_ON_READ: bool = #check_on_read;
            #is_valid_fn
            #name_fn
            #schema_fn
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

/// Rust's primitive type names: a stable name must not be one of them (`bool` is not
/// valid for every bit pattern, and the others are simply taken).
const PRIMITIVES: &[&str] = &[
    "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128",
    "isize", "f16", "f32", "f64", "f128",
];

/// `ty` as written, with the spaces of its tokens tidied (`[u8; 4]`, not `[u8 ; 4]`).
fn type_text(ty: &syn::Type) -> String {
    let tokens = quote!(#ty).to_string();
    let chars = tokens.chars().collect::<Vec<_>>();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let mut text = String::new();
    for (i, &c) in chars.iter().enumerate() {
        // Keep the spaces between two words (`&'static str`), drop the others.
        if c != ' ' || (i > 0 && word(chars.get(i - 1)) && word(chars.get(i + 1))) {
            text.push(c);
        }
    }
    text.replace(';', "; ").replace(',', ", ")
}

/// `text` as a format string that prints itself (the messages of the generated
/// `assert!`s are format strings).
fn escape_braces(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
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
    if name.starts_with(['[', '(']) {
        return err(
            "type_name must not start with `[` or `(`: those are the names of arrays and \
             tuples, which iox composes from their elements' names"
                .into(),
        );
    }
    if PRIMITIVES.contains(&name.as_str()) {
        return err(format!(
            "type_name must not be `{name}`: that is the name of Rust's built-in `{name}`, \
             and a service carrying it must not be opened with another type"
        ));
    }
    if name.len() > MAX_TYPE_NAME {
        return err(format!(
            "type_name is {} bytes long; at most {MAX_TYPE_NAME} are allowed",
            name.len()
        ));
    }
    Ok(())
}
