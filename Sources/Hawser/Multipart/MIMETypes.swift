// The extension → MIME type table multipart file parts use. AF asks UTType; Linux has no such
// database in the toolchain (and /etc/mime.types is not always installed), so Hawser carries
// the common types itself.

extension MultipartFormData {
    /// The MIME type for a file-name extension (case-insensitive, without the dot);
    /// `application/octet-stream` when the extension is unknown or empty.
    public static func mimeType(forPathExtension pathExtension: String) -> String {
        mimeTypes[pathExtension.lowercased()] ?? "application/octet-stream"
    }

    static let mimeTypes: [String: String] = [
        // Text
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "conf": "text/plain",
        "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "tsv": "text/tab-separated-values", "md": "text/markdown", "markdown": "text/markdown",
        "ics": "text/calendar", "vcf": "text/vcard", "rtf": "text/rtf", "xml": "text/xml",
        "js": "text/javascript", "mjs": "text/javascript",
        // Application
        "json": "application/json", "jsonld": "application/ld+json", "geojson": "application/geo+json",
        "pdf": "application/pdf", "plist": "application/x-plist", "zip": "application/zip",
        "gz": "application/gzip", "tgz": "application/gzip", "tar": "application/x-tar",
        "bz2": "application/x-bzip2", "xz": "application/x-xz", "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar", "zst": "application/zstd",
        "wasm": "application/wasm", "bin": "application/octet-stream", "exe": "application/octet-stream",
        "dmg": "application/x-apple-diskimage", "deb": "application/vnd.debian.binary-package",
        "rpm": "application/x-rpm", "jar": "application/java-archive", "apk": "application/vnd.android.package-archive",
        "ipa": "application/octet-stream", "sql": "application/sql", "yaml": "application/yaml",
        "yml": "application/yaml",
        "toml": "application/toml", "rss": "application/rss+xml", "atom": "application/atom+xml",
        "xhtml": "application/xhtml+xml", "svg": "image/svg+xml", "ps": "application/postscript",
        "eps": "application/postscript", "epub": "application/epub+zip",
        "doc": "application/msword", "dot": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "odp": "application/vnd.oasis.opendocument.presentation",
        "pages": "application/x-iwork-pages-sffpages", "numbers": "application/x-iwork-numbers-sffnumbers",
        "key": "application/x-iwork-keynote-sffkey",
        // Certificates and keys (AF's test expects .cer → application/x-x509-ca-cert)
        "cer": "application/x-x509-ca-cert", "crt": "application/x-x509-ca-cert", "der": "application/x-x509-ca-cert",
        "pem": "application/x-pem-file", "p12": "application/x-pkcs12", "pfx": "application/x-pkcs12",
        "p7b": "application/x-pkcs7-certificates", "p7c": "application/pkcs7-mime", "csr": "application/pkcs10",
        // Images
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "gif": "image/gif",
        "webp": "image/webp", "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff",
        "ico": "image/vnd.microsoft.icon",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "jxl": "image/jxl",
        // Audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg",
        "oga": "audio/ogg", "opus": "audio/opus", "flac": "audio/flac", "mid": "audio/midi", "midi": "audio/midi",
        "aiff": "audio/aiff", "aif": "audio/aiff", "caf": "audio/x-caf", "weba": "audio/webm",
        // Video
        "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime", "qt": "video/quicktime",
        "webm": "video/webm", "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg",
        "mpg": "video/mpeg", "ogv": "video/ogg", "3gp": "video/3gpp", "ts": "video/mp2t", "wmv": "video/x-ms-wmv",
        // Fonts
        "ttf": "font/ttf", "otf": "font/otf", "woff": "font/woff", "woff2": "font/woff2",
    ]
}
