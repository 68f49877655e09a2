// The default serializers of the managers: AFNetworking's.
import HawserCore

enum ManagerDefaults {
    /// AFHTTPSessionManager's default: an `AFHTTPRequestSerializer`.
    static var requestSerializer: any RequestSerialization { HTTPRequestSerializer() }

    /// AFURLSessionManager's and AFHTTPSessionManager's default: an `AFJSONResponseSerializer`.
    static var responseSerializer: any ResponseSerialization { JSONResponseSerializer() }
}
