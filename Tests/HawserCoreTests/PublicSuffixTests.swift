import Testing

@testable import HawserCookies

@Suite("Public Suffix List")
struct PublicSuffixTests {
    // MARK: The list's algorithm, one rule kind at a time

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        /// Its public suffix, and the rule that gives it.
        let suffix: String?
        let rule: String
        var testDescription: String { "\(self.name) (\(self.rule))" }
    }

    @Test(
        "the prevailing rule gives the public suffix",
        arguments: [
            // Plain: a listed top-level domain.
            Case(name: "example.com", suffix: "com", rule: "com"),
            Case(name: "com", suffix: "com", rule: "com"),
            // Multi-label, and the longest match winning over a shorter one (es, nom.es).
            Case(name: "www.example.co.uk", suffix: "co.uk", rule: "co.uk"),
            Case(name: "a.nom.es", suffix: "nom.es", rule: "nom.es"),
            Case(name: "b.a.nom.es", suffix: "nom.es", rule: "nom.es"),
            Case(name: "nom.es", suffix: "nom.es", rule: "nom.es"),
            Case(name: "example.es", suffix: "es", rule: "es"),
            Case(name: "test.k12.ak.us", suffix: "k12.ak.us", rule: "k12.ak.us"),
            // Wildcard: any one label under it.
            Case(name: "foo.ck", suffix: "foo.ck", rule: "*.ck"),
            Case(name: "a.b.foo.ck", suffix: "foo.ck", rule: "*.ck"),
            Case(name: "ck", suffix: "ck", rule: "* (the wildcard needs a label)"),
            Case(name: "x.kawasaki.jp", suffix: "x.kawasaki.jp", rule: "*.kawasaki.jp"),
            // A wildcard's parent is a suffix too, unlisted (browsers, libpsl, the list's linter).
            Case(name: "kawasaki.jp", suffix: "kawasaki.jp", rule: "*.kawasaki.jp lists kawasaki.jp"),
            Case(
                name: "platformsh.site",
                suffix: "platformsh.site",
                rule: "*.platformsh.site (PRIVATE) lists platformsh.site"
            ),
            // Exception: beats the wildcard; its parent is the suffix.
            Case(name: "www.ck", suffix: "ck", rule: "!www.ck"),
            Case(name: "a.www.ck", suffix: "ck", rule: "!www.ck"),
            Case(name: "city.kawasaki.jp", suffix: "kawasaki.jp", rule: "!city.kawasaki.jp"),
            Case(name: "www.city.kawasaki.jp", suffix: "kawasaki.jp", rule: "!city.kawasaki.jp"),
            // Private section: shared hosting, its wildcards too.
            Case(name: "alice.github.io", suffix: "github.io", rule: "github.io (PRIVATE)"),
            Case(name: "github.io", suffix: "github.io", rule: "github.io (PRIVATE)"),
            Case(name: "blog.blogspot.com", suffix: "blogspot.com", rule: "blogspot.com (PRIVATE)"),
            Case(
                name: "ec2-1-2-3-4.us-west-1.compute.amazonaws.com",
                suffix: "us-west-1.compute.amazonaws.com",
                rule: "*.compute.amazonaws.com (PRIVATE)"
            ),
            // Unknown top-level domain: the implicit "*" rule.
            Case(name: "www.example.zzzunlisted", suffix: "zzzunlisted", rule: "*"),
            Case(name: "zzzunlisted", suffix: "zzzunlisted", rule: "*"),
            Case(name: "printer.local", suffix: "local", rule: "*"),
            // IDN rules, in Unicode and in A-labels.
            Case(name: "食狮.公司.cn", suffix: "公司.cn", rule: "公司.cn"),
            Case(name: "xn--85x722f.xn--55qx5d.cn", suffix: "xn--55qx5d.cn", rule: "公司.cn as xn--55qx5d.cn"),
            Case(name: "www.食狮.中国", suffix: "中国", rule: "中国"),
            Case(name: "www.xn--85x722f.xn--fiqs8s", suffix: "xn--fiqs8s", rule: "中国 as xn--fiqs8s"),
            Case(name: "example.xn--p1ai", suffix: "xn--p1ai", rule: "рф as xn--p1ai"),
            Case(name: "пример.рф", suffix: "рф", rule: "рф"),
            // Not domain names.
            Case(name: "", suffix: nil, rule: "empty"),
            Case(name: "a..com", suffix: nil, rule: "empty label"),
            Case(name: ".com", suffix: nil, rule: "empty label"),
            Case(name: "127.0.0.1", suffix: nil, rule: "IPv4 literal"),
            Case(name: "::1", suffix: nil, rule: "IPv6 literal"),
        ]
    )
    func prevailingRule(_ c: Case) {
        #expect(PublicSuffixes.publicSuffix(of: c.name) == c.suffix)
        #expect(PublicSuffixes.isPublicSuffix(c.name) == (c.name.isEmpty || c.suffix == c.name))
    }

    @Test("isPublicSuffix for each rule kind")
    func isPublicSuffix() {
        let suffixes = [
            "com", "uk", "co.uk", "nom.es", "foo.ck", "kawasaki.jp", "x.kawasaki.jp", "github.io",
            "us-west-1.compute.amazonaws.com", "compute.amazonaws.com", "zzzunlisted", "localhost", "公司.cn",
            "xn--55qx5d.cn", "中国",
            "xn--fiqs8s", "CO.UK",
        ]
        for s in suffixes { #expect(PublicSuffixes.isPublicSuffix(s), "\(s)") }
        let registrable = [
            "example.com", "example.co.uk", "a.nom.es", "www.ck", "city.kawasaki.jp", "alice.github.io",
            "amazonaws.com", "a.zzzunlisted", "食狮.公司.cn", "xn--85x722f.xn--55qx5d.cn",
            "127.0.0.1", "::1", "a..com", "com.",
        ]
        for s in registrable { #expect(!PublicSuffixes.isPublicSuffix(s), "\(s)") }
    }

    @Test("a colon followed by a combining mark still makes an address literal (FuzzCookieParser's find)")
    func colonWithCombiningMark() {
        // ":" + U+1DF7 is one Character that is not ":"; the checks read bytes.
        let name = "v 2 08:\u{1DF7}cnone=0/x/"
        #expect(CookieRules.isIPAddress(name))
        #expect(PublicSuffixes.publicSuffix(of: name) == nil)
        #expect(!PublicSuffixes.isPublicSuffix(name))
        #expect(PublicSuffixes.registrableDomain(of: name) == nil)
    }

    // MARK: The list's own test vectors

    /// tests/test_psl.txt of the Public Suffix List (public domain, CC0): each name and its
    /// registrable domain. Mixed-case names are canonicalized as the cookie jar does first;
    /// a leading dot makes a name that is not a domain name.
    @Test(
        "the list's checkPublicSuffix vectors",
        arguments: [
            ("COM", nil), ("example.COM", "example.com"), ("WwW.example.COM", "example.com"),
            (".com", nil), (".example", nil), (".example.com", nil), (".example.example", nil),
            ("example", nil), ("example.example", "example.example"), ("b.example.example", "example.example"),
            ("a.b.example.example", "example.example"),
            ("biz", nil), ("domain.biz", "domain.biz"), ("b.domain.biz", "domain.biz"),
            ("a.b.domain.biz", "domain.biz"),
            ("com", nil), ("example.com", "example.com"), ("b.example.com", "example.com"),
            ("a.b.example.com", "example.com"),
            ("uk.com", nil), ("example.uk.com", "example.uk.com"), ("b.example.uk.com", "example.uk.com"),
            ("a.b.example.uk.com", "example.uk.com"), ("test.ac", "test.ac"),
            ("mm", nil), ("c.mm", nil), ("b.c.mm", "b.c.mm"), ("a.b.c.mm", "b.c.mm"),
            ("jp", nil), ("test.jp", "test.jp"), ("www.test.jp", "test.jp"), ("ac.jp", nil),
            ("test.ac.jp", "test.ac.jp"),
            ("www.test.ac.jp", "test.ac.jp"), ("kyoto.jp", nil), ("test.kyoto.jp", "test.kyoto.jp"),
            ("ide.kyoto.jp", nil),
            ("b.ide.kyoto.jp", "b.ide.kyoto.jp"), ("a.b.ide.kyoto.jp", "b.ide.kyoto.jp"), ("c.kobe.jp", nil),
            ("b.c.kobe.jp", "b.c.kobe.jp"), ("a.b.c.kobe.jp", "b.c.kobe.jp"), ("city.kobe.jp", "city.kobe.jp"),
            ("www.city.kobe.jp", "city.kobe.jp"),
            ("ck", nil), ("test.ck", nil), ("b.test.ck", "b.test.ck"), ("a.b.test.ck", "b.test.ck"),
            ("www.ck", "www.ck"),
            ("www.www.ck", "www.ck"),
            ("us", nil), ("test.us", "test.us"), ("www.test.us", "test.us"), ("ak.us", nil),
            ("test.ak.us", "test.ak.us"),
            ("www.test.ak.us", "test.ak.us"), ("k12.ak.us", nil), ("test.k12.ak.us", "test.k12.ak.us"),
            ("www.test.k12.ak.us", "test.k12.ak.us"),
            ("食狮.com.cn", "食狮.com.cn"), ("食狮.公司.cn", "食狮.公司.cn"), ("www.食狮.公司.cn", "食狮.公司.cn"),
            ("shishi.公司.cn", "shishi.公司.cn"), ("公司.cn", nil), ("食狮.中国", "食狮.中国"), ("www.食狮.中国", "食狮.中国"),
            ("shishi.中国", "shishi.中国"), ("中国", nil),
            ("xn--85x722f.com.cn", "xn--85x722f.com.cn"), ("xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
            ("www.xn--85x722f.xn--55qx5d.cn", "xn--85x722f.xn--55qx5d.cn"),
            ("shishi.xn--55qx5d.cn", "shishi.xn--55qx5d.cn"),
            ("xn--55qx5d.cn", nil), ("xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"),
            ("www.xn--85x722f.xn--fiqs8s", "xn--85x722f.xn--fiqs8s"), ("shishi.xn--fiqs8s", "shishi.xn--fiqs8s"),
            ("xn--fiqs8s", nil),
        ] as [(String, String?)]
    )
    func listVectors(_ name: String, _ registrable: String?) {
        let canonical = name.hasPrefix(".") ? name : CookieRules.canonicalDomain(name)
        #expect(PublicSuffixes.registrableDomain(of: canonical) == registrable)
    }

    // MARK: The generated table

    @Test("the table is well formed: labels in bounds, siblings sorted, children after their parent")
    func tableShape() {
        #expect(PublicSuffixes.rootCount > 1000 && PublicSuffixes.nodeCount > 9000)
        func expectSorted(_ records: Range<Int>) {
            for i in records.dropFirst() {
                let a = PublicSuffixes.node(i - 1).label
                let b = PublicSuffixes.node(i).label
                #expect(Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)), "records \(i - 1), \(i): \(a), \(b)")
            }
        }
        expectSorted(0..<PublicSuffixes.rootCount)
        var expectedFirstChild = PublicSuffixes.rootCount
        var flagCount = 0
        for i in 0..<PublicSuffixes.nodeCount {
            let node = PublicSuffixes.node(i)  // traps if the label is out of bounds
            #expect(!node.label.isEmpty && !node.label.utf8.contains(UInt8(ascii: ".")), "record \(i)")
            // Children of node i come right after those of node i - 1, and after node i.
            guard node.firstChild == expectedFirstChild, node.endChild >= node.firstChild, node.firstChild > i,
                node.endChild <= PublicSuffixes.nodeCount
            else {
                Issue.record(
                    "record \(i): children \(node.firstChild)..<\(node.endChild), expected from \(expectedFirstChild)"
                )
                return
            }
            expectSorted(node.firstChild..<node.endChild)
            #expect(node.flags & 3 != 3, "record \(i) is both a rule and an exception")
            #expect(
                node.flags != 0 || node.endChild > node.firstChild,
                "record \(i) is neither a rule nor on the way to one"
            )
            expectedFirstChild = node.endChild
            flagCount += (node.flags & 1) + (node.flags >> 1 & 1) + (node.flags >> 2 & 1)
        }
        #expect(expectedFirstChild == PublicSuffixes.nodeCount)
        #expect(flagCount == PublicSuffixes.entryCount)
    }

    @Test("every entry of the table is found by the lookup")
    func everyEntry() {
        // Full names: a node's children follow it (breadth first), so parents are named first.
        var names = [String](repeating: "", count: PublicSuffixes.nodeCount)
        var checked = 0
        for i in 0..<PublicSuffixes.nodeCount {
            let node = PublicSuffixes.node(i)
            if i < PublicSuffixes.rootCount { names[i] = node.label }
            for c in node.firstChild..<max(node.firstChild, node.endChild) {
                names[c] = PublicSuffixes.node(c).label + "." + names[i]
            }
            let name = names[i]
            if node.flags & 1 != 0 {
                let below = node.flags & 4 != 0 ? "zzzunlisted." + name : name  // under its own wildcard?
                #expect(
                    PublicSuffixes.isPublicSuffix(name)
                        && PublicSuffixes.publicSuffix(of: "zzzunlisted." + name) == below,
                    "rule \(name)"
                )
                checked += 1
            }
            if node.flags & 2 != 0 {
                let parent = String(name.drop { $0 != "." }.dropFirst())
                #expect(
                    PublicSuffixes.publicSuffix(of: name) == parent
                        && PublicSuffixes.registrableDomain(of: "x." + name) == name,
                    "exception !\(name)"
                )
                checked += 1
            }
            if node.flags & 4 != 0 {
                #expect(
                    PublicSuffixes.publicSuffix(of: "x.zzzunlisted." + name) == "zzzunlisted." + name
                        && PublicSuffixes.isPublicSuffix(name),
                    "wildcard *.\(name)"
                )
                checked += 1
            }
        }
        #expect(checked == PublicSuffixes.entryCount)
    }
}
