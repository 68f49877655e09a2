/// Moves a loop-confined reference through a @Sendable closure that only uses it back on
/// the same loop.
package struct UnsafeTransfer<T>: @unchecked Sendable {
    package let value: T
    package init(_ value: T) { self.value = value }
}
