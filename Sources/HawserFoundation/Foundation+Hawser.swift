// What ties Hawser to full Foundation, for code written against AFNetworking's Foundation types:
// `NSNull` and `NSNumber` as parameter values, an `InputStream` as a multipart part,
// and the reachability notification on `NotificationCenter`. `Hawser` itself needs
// FoundationEssentials only; link this module to get these.
import Foundation
import Hawser
import HawserCore

// MARK: - Foundation objects as parameter values

extension NSNull: ParameterValueConvertible {
    /// `null`: the bare key in a query string, an empty form part, `null` in JSON.
    public var parameterValue: JSONValue { .null }
}

extension NSNumber: ParameterValueConvertible {
    /// A boolean NSNumber as `true`/`false` (1/0 in a query string), a floating-point one as a
    /// double, any other as an integer (a `UInt64` beyond `Int64.max` as a double).
    public var parameterValue: JSONValue {
        let kind = String(cString: self.objCType)
        if kind == "c" || kind == "B" { return .bool(self.boolValue) }
        if kind == "d" || kind == "f" { return .number(.double(self.doubleValue)) }
        if kind == "Q" || kind == "L" || kind == "I" {
            let u = self.uint64Value
            if let i = Int64(exactly: u) { return .number(.integer(i)) }
            return .number(.double(Double(u)))
        }
        return .number(.integer(self.int64Value))
    }
}

// MARK: - InputStream parts

extension MultipartFormData {
    /// A part read from the `InputStream` that `makeStream` returns each time the body is sent
    /// (AF's `appendPartWithInputStream:name:fileName:length:mimeType:`). The stream must give
    /// exactly `length` bytes; fewer or more fails the send with `.bodyReadFailed`.
    public mutating func appendPart(
        withInputStream makeStream: @escaping @Sendable () -> InputStream,
        name: String,
        fileName: String,
        length: Int64,
        mimeType: String
    ) {
        self.appendPart(
            withByteSource: { InputStreamReader(stream: makeStream()) },
            name: name,
            fileName: fileName,
            length: length,
            mimeType: mimeType
        )
    }
}

/// Reads a Foundation `InputStream` as a ``MultipartByteReader``.
struct InputStreamReader: MultipartByteReader {
    let stream: InputStream
    var opened = false

    init(stream: InputStream) { self.stream = stream }

    mutating func read(maxLength: Int) throws -> [UInt8] {
        if !self.opened {
            self.stream.open()
            self.opened = true
        }
        var buffer = [UInt8](repeating: 0, count: max(1, maxLength))
        let n = buffer.withUnsafeMutableBufferPointer { self.stream.read($0.baseAddress!, maxLength: $0.count) }
        if n < 0 {
            throw SerializationError(
                .bodyReadFailed,
                "the input stream failed: \(self.stream.streamError.map { "\($0)" } ?? "unknown error")"
            )
        }
        if n == 0 { self.stream.close() }
        return Array(buffer[..<n])
    }
}

// MARK: - The reachability notification

extension Notification.Name {
    /// Posted on `NotificationCenter.default` (object: the manager) when a monitoring
    /// `NetworkReachabilityManager`'s status changes (AFNetworking's
    /// `AFNetworkingReachabilityDidChangeNotification`, with its name,
    /// `com.alamofire.networking.reachability.change`). The user info holds the status as a
    /// `NetworkReachabilityManager/NetworkReachabilityStatus` under
    /// `NetworkReachabilityManager/statusUserInfoKey`, and its raw value (an `Int`, AF's
    /// NSNumber) under ``AFNetworkingReachabilityNotificationStatusItem``.
    ///
    /// Posting starts the first time this name is used (observing it does), through a
    /// `NetworkReachabilityManager/addProcessObserver(_:)` observer that runs where AF posts.
    public static let reachabilityDidChange: Notification.Name = {
        let name = Notification.Name(rawValue: "com.alamofire.networking.reachability.change")
        NetworkReachabilityManager.addProcessObserver { manager, change in
            NotificationCenter.default.post(
                name: name,
                object: manager,
                userInfo: [
                    NetworkReachabilityManager.statusUserInfoKey: change.status,
                    AFNetworkingReachabilityNotificationStatusItem: change.status.rawValue,
                ]
            )
        }
        return name
    }()

    /// AFNetworking's name for ``reachabilityDidChange`` (the same notification).
    public static var AFNetworkingReachabilityDidChange: Notification.Name { .reachabilityDidChange }
}

/// AFNetworking's `AFNetworkingReachabilityDidChangeNotification`: the raw name of
/// `Notification.Name.reachabilityDidChange` (using it starts the posting, as the name does).
public var AFNetworkingReachabilityDidChangeNotification: String { Notification.Name.reachabilityDidChange.rawValue }

/// AFNetworking's `AFNetworkingReachabilityNotificationStatusItem`: the user-info key of the
/// status's raw value (an `Int`: -1 unknown, 0 not reachable, 1 WWAN, 2 Wi-Fi, 3 Ethernet).
public let AFNetworkingReachabilityNotificationStatusItem = "AFNetworkingReachabilityNotificationStatusItem"
