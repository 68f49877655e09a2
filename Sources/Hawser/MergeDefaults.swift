// The default serializers of the managers.
//
// MERGE: the concrete serializers (HTTPRequestSerializer, JSONResponseSerializer) are written on
// another branch. When they land, switch the two marked lines below — nothing else changes.
import Foundation
import HawserCore

enum MergeDefaults {
    /// AFHTTPSessionManager's default: an `AFHTTPRequestSerializer`.
    static var requestSerializer: any RequestSerialization {
        InterimRequestSerializer()   // MERGE: HTTPRequestSerializer()
    }

    /// AFURLSessionManager's and AFHTTPSessionManager's default: an `AFJSONResponseSerializer`.
    static var responseSerializer: any ResponseSerialization {
        InterimResponseSerializer()   // MERGE: JSONResponseSerializer()
    }
}

/// Stands in for HTTPRequestSerializer until the merge: sends the request as built and refuses
/// parameters (which it cannot encode) with an error rather than dropping them.
struct InterimRequestSerializer: RequestSerialization {
    struct ParametersUnsupported: Error, CustomStringConvertible {
        var description: String { "this build has no request serializer that encodes parameters; set HTTPSessionManager.requestSerializer" }
    }

    func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest {
        if let parameters, !parameters.isEmpty { throw ParametersUnsupported() }
        return request
    }
}

/// Stands in for JSONResponseSerializer until the merge: hands back the body as `Data`, unvalidated.
struct InterimResponseSerializer: ResponseSerialization {
    func responseObject(for response: HTTPResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        data.map { Data($0) }
    }
}
