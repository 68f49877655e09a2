// Which domains are public suffixes, for refusing cookies set on them (RFC 6265 §5.3 step 5).
import HawserHTTP1

/// A small built-in public-suffix check.
///
/// Covered: every single-label domain (`com`, `uk`, `local`: any top-level domain), and
/// a fixed list of common multi-label suffixes — the second-level registries of the
/// largest country codes (`co.uk`, `com.au`, `co.jp`, …) and popular shared-hosting
/// domains (`github.io`, `herokuapp.com`, `vercel.app`, …).
///
/// Not covered: the rest of the Mozilla Public Suffix List (about 9,000 rules), its
/// wildcard rules (`*.ck`, `*.kawasaki.jp`) and exceptions (`!www.ck`). A cookie for a
/// suffix missing here (say `Domain=nom.es` from `a.nom.es`) is accepted, so sites under
/// such a suffix can set cookies for each other — the same exposure curl has when built
/// without libpsl.
public enum PublicSuffixes {
    /// Whether `domain` (canonical: lower-case, no leading dot) is a public suffix.
    public static func isPublicSuffix(_ domain: String) -> Bool {
        if domain.isEmpty { return true }
        if !domain.contains(".") { return !CookieRules.isIPAddress(domain) }
        return self.multiLabel.contains(domain)
    }

    static let multiLabel: Set<String> = [
        // United Kingdom
        "co.uk", "org.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk", "sch.uk", "ac.uk", "gov.uk", "nhs.uk", "police.uk",
        // Australia, New Zealand
        "com.au", "net.au", "org.au", "edu.au", "gov.au", "asn.au", "id.au",
        "co.nz", "net.nz", "org.nz", "govt.nz", "ac.nz", "geek.nz", "gen.nz", "school.nz",
        // Japan, Korea, China, Taiwan, Hong Kong
        "co.jp", "ne.jp", "or.jp", "ac.jp", "go.jp", "ad.jp", "ed.jp", "gr.jp", "lg.jp",
        "co.kr", "ne.kr", "or.kr", "re.kr", "go.kr", "ac.kr",
        "com.cn", "net.cn", "org.cn", "gov.cn", "edu.cn", "ac.cn",
        "com.tw", "net.tw", "org.tw", "edu.tw", "gov.tw", "idv.tw",
        "com.hk", "net.hk", "org.hk", "edu.hk", "gov.hk", "idv.hk",
        // South and South-East Asia
        "co.in", "net.in", "org.in", "firm.in", "gen.in", "ind.in", "ac.in", "edu.in", "gov.in", "res.in",
        "com.sg", "net.sg", "org.sg", "edu.sg", "gov.sg", "com.my", "net.my", "org.my", "edu.my", "gov.my",
        "co.id", "or.id", "ac.id", "go.id", "web.id", "com.ph", "net.ph", "org.ph", "gov.ph",
        "co.th", "in.th", "ac.th", "go.th", "or.th", "com.vn", "net.vn", "org.vn", "edu.vn", "gov.vn",
        "com.pk", "net.pk", "org.pk", "com.bd",
        // Americas
        "com.br", "net.br", "org.br", "gov.br", "edu.br", "art.br", "blog.br", "eco.br",
        "com.mx", "net.mx", "org.mx", "gob.mx", "edu.mx", "com.ar", "net.ar", "org.ar", "gob.ar",
        "com.co", "net.co", "org.co", "gov.co", "com.pe", "com.ve", "com.ec", "com.uy",
        "gc.ca", "qc.ca", "on.ca", "bc.ca", "ab.ca",
        // Europe, Middle East, Africa
        "com.tr", "net.tr", "org.tr", "gov.tr", "edu.tr", "com.ua", "net.ua", "org.ua", "gov.ua", "in.ua",
        "com.pl", "net.pl", "org.pl", "gov.pl", "edu.pl", "co.at", "or.at", "gv.at", "ac.at",
        "com.es", "nom.es", "org.es", "gob.es", "edu.es", "com.pt", "org.pt", "com.gr", "gov.gr",
        "co.il", "org.il", "net.il", "ac.il", "gov.il", "com.sa", "gov.sa", "com.eg", "gov.eg",
        "co.za", "org.za", "gov.za", "ac.za", "net.za", "com.ng", "gov.ng", "co.ke", "or.ke",
        // Shared hosting and platforms (PSL private section)
        "github.io", "githubusercontent.com", "gitlab.io", "pages.dev", "workers.dev", "netlify.app",
        "vercel.app", "now.sh", "herokuapp.com", "herokussl.com", "appspot.com", "blogspot.com",
        "firebaseapp.com", "web.app", "cloudfront.net", "s3.amazonaws.com", "elasticbeanstalk.com",
        "azurewebsites.net", "cloudapp.net", "azurestaticapps.net", "trafficmanager.net", "onrender.com",
        "fly.dev", "glitch.me", "repl.co", "ngrok.io", "ngrok-free.app", "duckdns.org", "dyndns.org",
        "no-ip.org", "readthedocs.io", "surge.sh", "bitbucket.io", "codeberg.page", "wordpress.com",
        "tumblr.com", "myshopify.com", "webflow.io", "carrd.co", "deno.dev", "supabase.co",
    ]
}
