//! The app's commands as `syn` reads them from src/commands.rs, and the TypeScript the window
//! calls them through: each command's arguments (by the names Tauri expects, camelCase) and
//! result, and a typed function per command, so `ui/src/lib/ipc.ts` restates no argument list
//! and a renamed argument fails the window's type check.

use std::collections::BTreeSet;

use syn::{FnArg, GenericArgument, Item, ItemFn, Pat, PathArguments, ReturnType, Type};

/// One `#[tauri::command]` function.
pub struct Command {
    pub name: String,
    /// The arguments the window passes: (name as written in Rust, TypeScript type).
    pub args: Vec<(String, String)>,
    pub result: String,
    /// Its doc comment, for the generated function.
    pub doc: Vec<String>,
}

/// Arguments Tauri supplies itself (state, the app, the window), never the caller.
const INJECTED: &[&str] = &["Console_", "State", "AppHandle", "Window", "WebviewWindow"];

/// The commands declared in `source`, in file order.
pub fn declared_commands(source: &str) -> Vec<Command> {
    let file = syn::parse_file(source).expect("src/commands.rs parses as Rust");
    let commands: Vec<Command> = file
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Fn(function) if is_command(function) => Some(command(function)),
            _ => None,
        })
        .collect();
    assert!(
        !commands.is_empty(),
        "no #[tauri::command] in src/commands.rs"
    );
    commands
}

fn is_command(function: &ItemFn) -> bool {
    function.attrs.iter().any(|attr| {
        let segments: Vec<String> = attr
            .path()
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        segments == ["tauri", "command"] || segments == ["command"]
    })
}

fn command(function: &ItemFn) -> Command {
    let name = function.sig.ident.to_string();
    let args = function
        .sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(typed) => Some(typed),
            FnArg::Receiver(_) => None,
        })
        .filter(|typed| !INJECTED.contains(&outer_name(&typed.ty).as_str()))
        .map(|typed| match &*typed.pat {
            Pat::Ident(ident) => (ident.ident.to_string(), ts_type(&typed.ty)),
            _ => panic!("{name}: an argument that is not a plain name"),
        })
        .collect();
    let result = match &function.sig.output {
        ReturnType::Default => "null".to_string(),
        ReturnType::Type(_, ty) => ts_type(ty),
    };
    let doc = function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(value) => match &value.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value().trim().to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    Command {
        name,
        args,
        result,
        doc,
    }
}

/// The last segment's name of a path type (`State<'_, T>` is `State`).
fn outer_name(ty: &Type) -> String {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        Type::Reference(reference) => outer_name(&reference.elem),
        _ => String::new(),
    }
}

fn type_args(ty: &Type) -> Vec<&Type> {
    let Type::Path(path) = ty else {
        return Vec::new();
    };
    let Some(last) = path.path.segments.last() else {
        return Vec::new();
    };
    match &last.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The TypeScript a value of `ty` arrives as, by serde's JSON and the bindings' names.
pub fn ts_type(ty: &Type) -> String {
    if let Type::Tuple(tuple) = ty {
        assert!(tuple.elems.is_empty(), "a tuple in a command's signature");
        return "null".into();
    }
    if let Type::Reference(reference) = ty {
        return ts_type(&reference.elem);
    }
    let name = outer_name(ty);
    let args = type_args(ty);
    match (name.as_str(), args.as_slice()) {
        ("String" | "str" | "PathBuf" | "Path", _) => "string".into(),
        ("bool", _) => "boolean".into(),
        (
            "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" | "f32"
            | "f64",
            _,
        ) => "number".into(),
        ("Option", [inner]) => format!("{} | null", ts_type(inner)),
        ("Vec", [inner]) => match ts_type(inner) {
            simple if simple.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                format!("{simple}[]")
            }
            compound => format!("({compound})[]"),
        },
        ("BTreeMap" | "HashMap", [key, value]) => {
            format!("Record<{}, {}>", ts_type(key), ts_type(value))
        }
        // A command's `Result<T, CommandError>` resolves to `T` or rejects.
        ("Answer" | "Result", [ok, ..]) => ts_type(ok),
        (other, []) if !other.is_empty() => other.to_string(),
        _ => panic!("a command's type the bindings cannot name: {name}"),
    }
}

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The names of the bindings a type text refers to.
fn named_types(text: &str, into: &mut BTreeSet<String>) {
    const BUILT_IN: &[&str] = &["string", "number", "boolean", "null", "Record"];
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.starts_with(|c: char| c.is_ascii_uppercase()) && !BUILT_IN.contains(&word) {
            into.insert(word.to_string());
        }
    }
}

/// `ui/src/bindings/Commands.ts`: the `Commands` map, the `Command` names, and `commands(call)`,
/// a function per command with its arguments in the Rust order.
pub fn typescript(commands: &[Command]) -> String {
    let mut imports = BTreeSet::new();
    let mut map = String::new();
    let mut functions = String::new();
    for c in commands {
        for (_, ty) in &c.args {
            named_types(ty, &mut imports);
        }
        named_types(&c.result, &mut imports);
        let args: Vec<String> = c
            .args
            .iter()
            .map(|(name, ty)| format!("{}: {ty}", camel(name)))
            .collect();
        let arg_type = if args.is_empty() {
            "Record<string, never>".to_string()
        } else {
            format!("{{ {} }}", args.join("; "))
        };
        map.push_str(&format!(
            "  {}: {{ args: {arg_type}; result: {} }};\n",
            c.name, c.result
        ));
        if !c.doc.is_empty() {
            functions.push_str(&format!("    /** {} */\n", c.doc.join(" ")));
        }
        let names: Vec<String> = c.args.iter().map(|(name, _)| camel(name)).collect();
        let passed = if names.is_empty() {
            "{}".to_string()
        } else {
            format!("{{ {} }}", names.join(", "))
        };
        functions.push_str(&format!(
            "    {}: ({}) => call(\"{}\", {passed}),\n",
            camel(&c.name),
            args.join(", "),
            c.name,
        ));
    }
    let imports: String = imports
        .iter()
        .map(|t| format!("import type {{ {t} }} from \"./{t}\";\n"))
        .collect();
    format!(
        "// Generated from src-tauri/src/commands.rs by the bindings test. Do not edit this file manually.\n\
         {imports}\n\
         /** Every command the app declares: the arguments the window passes and what it answers. */\n\
         export type Commands = {{\n{map}}};\n\n\
         /** Every command's name. */\n\
         export type Command = keyof Commands;\n\n\
         /** How a command is invoked: by name, with its arguments. */\n\
         export type Call = <C extends Command>(command: C, args: Commands[C][\"args\"]) => Promise<Commands[C][\"result\"]>;\n\n\
         /** A function per command, its arguments in the Rust order. */\n\
         export function commands(call: Call) {{\n  return {{\n{functions}  }};\n}}\n"
    )
}
