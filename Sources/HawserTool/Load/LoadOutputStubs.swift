// Placeholder body of the SVG renderer.

extension LoadReport {
    /// Percentile spectrum and per-second timeline as a self-contained SVG.
    func renderSVG() -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n"
    }
}
