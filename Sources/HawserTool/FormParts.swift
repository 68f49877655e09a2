import Hawser

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// curl's `-F` arguments as parts of the AFNetworking layer's ``MultipartFormData``:
///
/// - `name=value` a field; `name=<FILE` a field whose value is FILE's contents;
/// - `name=@FILE` a file part, streamed from FILE when the body is sent (its file name FILE's
///   last path component, its type from curl's short table of extensions);
/// - `;type=MIME` and `;filename=NAME` after any of them, as curl reads them.
enum FormParts {
    struct Spec: Equatable {
        enum Kind: Equatable {
            case text(String)
            case fileContents(String)
            case file(String)
        }
        var name: String
        var kind: Kind
        var type: String?
        var fileName: String?
    }

    /// One `-F` argument, read as curl reads it: the value (or the file after `@` / `<`) ends at
    /// the first `;` unless it is in double quotes (with `\"` and `\\` escapes); then
    /// `;type=`, `;filename=` (also quoted); other parameters are skipped with a warning.
    static func parse(_ arg: String, warn: (String) -> Void = { _ in }) throws -> Spec {
        guard let eq = arg.firstIndex(of: "=") else {
            throw CurlOptions.UsageError(description: "-F '\(arg)' is not NAME=VALUE, NAME=@FILE or NAME=<FILE")
        }
        let name = String(arg[..<eq])
        var rest = arg[arg.index(after: eq)...]
        var prefix: Character? = nil
        if let first = rest.first, first == "@" || first == "<" {
            prefix = first
            rest = rest.dropFirst()
        }
        let value = Self.word(&rest)
        var type: String?
        var fileName: String?
        while rest.first == ";" {
            rest = rest.dropFirst()
            while rest.first == " " { rest = rest.dropFirst() }
            let lower = rest.lowercased()
            if lower.hasPrefix("type=") {
                rest = rest.dropFirst(5)
                type = Self.word(&rest)
            } else if lower.hasPrefix("filename=") {
                rest = rest.dropFirst(9)
                fileName = Self.word(&rest)
            } else {
                let unknown = Self.word(&rest)
                if !unknown.isEmpty { warn("skip unknown form field: \(unknown)") }
            }
        }
        let kind: Spec.Kind
        switch prefix {
        case "@": kind = .file(value)
        case "<": kind = .fileContents(value)
        default: kind = .text(value)
        }
        return Spec(name: name, kind: kind, type: type, fileName: fileName)
    }

    /// A word up to the next `;`, or a double-quoted string (its escapes undone) and what follows
    /// it up to the next `;`.
    private static func word(_ rest: inout Substring) -> String {
        if rest.first == "\"" {
            var out = ""
            var i = rest.index(after: rest.startIndex)
            while i < rest.endIndex, rest[i] != "\"" {
                if rest[i] == "\\", rest.index(after: i) < rest.endIndex,
                    rest[rest.index(after: i)] == "\"" || rest[rest.index(after: i)] == "\\"
                {
                    i = rest.index(after: i)
                }
                out.append(rest[i])
                i = rest.index(after: i)
            }
            rest = i < rest.endIndex ? rest[rest.index(after: i)...] : rest[rest.endIndex...]
            // Anything between the closing quote and the next ';' is dropped, as curl does.
            if let semi = rest.firstIndex(of: ";") { rest = rest[semi...] } else { rest = rest[rest.endIndex...] }
            return out
        }
        let end = rest.firstIndex(of: ";") ?? rest.endIndex
        let w = String(rest[..<end])
        rest = rest[end...]
        return w
    }

    /// The form: fields in memory, files streamed (only their sizes are read now).
    /// - Throws: ``ToolFailure`` 26 for a file that cannot be read, as curl.
    static func form(_ args: [String], warn: (String) -> Void = { _ in }) throws -> MultipartFormData {
        var form = MultipartFormData()
        for arg in args {
            let spec = try Self.parse(arg, warn: warn)
            do {
                switch spec.kind {
                case .file(let path):
                    let fileName = spec.fileName ?? Self.lastPathComponent(path)
                    try form.appendPart(
                        withFileURL: URL(fileURLWithPath: path),
                        name: spec.name,
                        fileName: fileName,
                        mimeType: spec.type ?? Self.curlContentType(forFileName: path)
                    )
                case .fileContents(let path):
                    let bytes = try FileIO.readAll(path: path)
                    try Self.appendField(&form, spec, bytes)
                case .text(let text):
                    try Self.appendField(&form, spec, Array(text.utf8))
                }
            } catch let e as FileIO.Error {
                throw ToolFailure(ExitCode.readError, "Failed to open/read local data from file/application: \(e)")
            } catch let e as SerializationError {
                throw ToolFailure(ExitCode.readError, "Failed to open/read local data from file/application: \(e)")
            }
        }
        return form
    }

    private static func appendField(_ form: inout MultipartFormData, _ spec: Spec, _ bytes: [UInt8]) throws {
        if spec.type == nil && spec.fileName == nil {
            form.appendPart(withFormData: bytes, name: spec.name)
            return
        }
        var disposition = "form-data; name=\"\(Self.escape(spec.name))\""
        if let f = spec.fileName { disposition += "; filename=\"\(Self.escape(f))\"" }
        var headers: [(name: String, value: String)] = [("Content-Disposition", disposition)]
        if let t = spec.type { headers.append(("Content-Type", t)) }
        do {
            try form.appendPart(withHeaders: headers, body: bytes)
        } catch {
            throw CurlOptions.UsageError(description: "-F \(spec.name): \(error)")
        }
    }

    /// Names inside quotes, escaped as curl (and browsers) do.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// The last path component of a file path, as curl names a file part.
    static func lastPathComponent(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    }

    /// curl's guess of a file part's type from its name (curl knows only these; everything
    /// else is application/octet-stream).
    static func curlContentType(forFileName name: String) -> String {
        let lower = name.lowercased()
        let table: [(String, String)] = [
            (".gif", "image/gif"), (".jpg", "image/jpeg"), (".jpeg", "image/jpeg"), (".png", "image/png"),
            (".svg", "image/svg+xml"), (".txt", "text/plain"), (".htm", "text/html"), (".html", "text/html"),
            (".pdf", "application/pdf"), (".xml", "application/xml"),
        ]
        for (ext, type) in table where lower.hasSuffix(ext) { return type }
        return "application/octet-stream"
    }
}
