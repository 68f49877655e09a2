// AFNetworking's task and session notifications on NotificationCenter, with AF's names and
// user-info keys, so observers ported from AFNetworking keep working. A thin adapter over the
// managers' one event channel: a process-wide EventMonitor that posts what AF posts.
import Foundation
import Hawser
import HawserCore

/// Posts AFNetworking's notifications on `NotificationCenter.default` for every task of every
/// manager in the process: resume, suspend, complete (with AF's user info), the download's file
/// move, and the session's invalidation. Installed once, process-wide, by ``install()`` — which
/// using any of AF's notification names (``AFNetworkingTaskDidCompleteNotification``,
/// `Notification.Name.AFNetworkingTaskDidComplete` …) does for you. Notifications are posted in
/// order on a private serial queue (AF posts on the main queue).
public final class NotificationCenterMonitor: EventMonitor {
    private let queue = DispatchQueue(label: "hawser.notifications")

    private static let installed: Void = {
        SessionManager.addProcessEventMonitor(NotificationCenterMonitor())
    }()

    /// Starts posting (once per process; later calls do nothing).
    public static func install() { _ = Self.installed }

    private init() {}

    private func post(_ name: String, _ object: AnyObject?, _ userInfo: [AnyHashable: Any]? = nil) {
        let box = Unchecked((object, userInfo))
        self.queue.async {
            NotificationCenter.default.post(
                name: Notification.Name(rawValue: name),
                object: box.value.0,
                userInfo: box.value.1
            )
        }
    }

    public func taskDidResume(_ task: SessionTask) { self.post(taskDidResumeName, task) }
    public func taskDidSuspend(_ task: SessionTask) { self.post(taskDidSuspendName, task) }

    public func task(_ task: SessionTask, didFinishWith info: TaskCompletionInfo) {
        var userInfo: [AnyHashable: Any] = [AFNetworkingTaskDidCompleteResponseSerializerKey: info.responseSerializer]
        if let asset = info.assetPath {
            userInfo[AFNetworkingTaskDidCompleteAssetPathKey] = asset
        } else if let data = info.responseData {
            userInfo[AFNetworkingTaskDidCompleteResponseDataKey] = data
        }
        if let object = info.serializedResponse { userInfo[AFNetworkingTaskDidCompleteSerializedResponseKey] = object }
        if let error = info.error { userInfo[AFNetworkingTaskDidCompleteErrorKey] = error }
        if let metrics = info.metrics { userInfo[AFNetworkingTaskDidCompleteSessionTaskMetrics] = metrics }
        self.post(taskDidCompleteName, task, userInfo)
    }

    public func downloadTask(_ task: DownloadTask, didMoveFileTo destination: URL) {
        self.post(downloadDidMoveName, task)
    }

    public func downloadTask(_ task: DownloadTask, didFailToMoveFileTo destination: URL, error: any Error) {
        self.post(downloadDidFailToMoveName, task, (error as NSError).userInfo)
    }

    public func sessionDidInvalidate(error: (any Error)?) {
        self.post(sessionDidInvalidateName, nil)
    }
}

/// Moves a value the caller no longer touches to the posting queue.
private struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

private let taskDidResumeName = "com.alamofire.networking.task.resume"
private let taskDidCompleteName = "com.alamofire.networking.task.complete"
private let taskDidSuspendName = "com.alamofire.networking.task.suspend"
private let sessionDidInvalidateName = "com.alamofire.networking.session.invalidate"
private let downloadDidMoveName = "com.alamofire.networking.session.download.file-manager-succeed"
private let downloadDidFailToMoveName = "com.alamofire.networking.session.download.file-manager-error"

/// A name, after making sure the notifications are posted.
private func posted(_ name: String) -> String {
    NotificationCenterMonitor.install()
    return name
}

// MARK: - AFNetworking's names

/// `AFNetworkingTaskDidResumeNotification` (object: the task). Using it starts the posting.
public var AFNetworkingTaskDidResumeNotification: String { posted(taskDidResumeName) }
/// `AFNetworkingTaskDidCompleteNotification` (object: the task; user info below). Using it starts the posting.
public var AFNetworkingTaskDidCompleteNotification: String { posted(taskDidCompleteName) }
/// `AFNetworkingTaskDidSuspendNotification` (object: the task). Using it starts the posting.
public var AFNetworkingTaskDidSuspendNotification: String { posted(taskDidSuspendName) }
/// `AFURLSessionDidInvalidateNotification` (no object). Using it starts the posting.
public var AFURLSessionDidInvalidateNotification: String { posted(sessionDidInvalidateName) }
/// `AFURLSessionDownloadTaskDidMoveFileSuccessfullyNotification` (object: the download task).
public var AFURLSessionDownloadTaskDidMoveFileSuccessfullyNotification: String { posted(downloadDidMoveName) }
/// `AFURLSessionDownloadTaskDidFailToMoveFileNotification` (object: the download task; user info:
/// the move error's).
public var AFURLSessionDownloadTaskDidFailToMoveFileNotification: String { posted(downloadDidFailToMoveName) }

/// `AFNetworkingTaskDidCompleteSerializedResponseKey`: what the serializer produced.
public let AFNetworkingTaskDidCompleteSerializedResponseKey =
    "com.alamofire.networking.task.complete.serializedresponse"
/// `AFNetworkingTaskDidCompleteResponseSerializerKey`: the response serializer.
public let AFNetworkingTaskDidCompleteResponseSerializerKey =
    "com.alamofire.networking.task.complete.responseserializer"
/// `AFNetworkingTaskDidCompleteResponseDataKey`: a data task's raw body (`Data`).
public let AFNetworkingTaskDidCompleteResponseDataKey = "com.alamofire.networking.complete.finish.responsedata"
/// `AFNetworkingTaskDidCompleteErrorKey`: the task's or the serializer's error.
public let AFNetworkingTaskDidCompleteErrorKey = "com.alamofire.networking.task.complete.error"
/// `AFNetworkingTaskDidCompleteAssetPathKey`: where a download's file was moved (`URL`).
public let AFNetworkingTaskDidCompleteAssetPathKey = "com.alamofire.networking.task.complete.assetpath"
/// `AFNetworkingTaskDidCompleteSessionTaskMetrics`: the task's `TaskMetrics`.
public let AFNetworkingTaskDidCompleteSessionTaskMetrics = "com.alamofire.networking.complete.sessiontaskmetrics"

extension Notification.Name {
    /// AFNetworking's task-resumed notification. Using it starts the posting.
    public static var AFNetworkingTaskDidResume: Notification.Name { .init(AFNetworkingTaskDidResumeNotification) }
    /// AFNetworking's task-completed notification. Using it starts the posting.
    public static var AFNetworkingTaskDidComplete: Notification.Name { .init(AFNetworkingTaskDidCompleteNotification) }
    /// AFNetworking's task-suspended notification. Using it starts the posting.
    public static var AFNetworkingTaskDidSuspend: Notification.Name { .init(AFNetworkingTaskDidSuspendNotification) }
    /// AFNetworking's session-invalidated notification. Using it starts the posting.
    public static var AFURLSessionDidInvalidate: Notification.Name { .init(AFURLSessionDidInvalidateNotification) }
    /// AFNetworking's download-moved notification. Using it starts the posting.
    public static var AFURLSessionDownloadTaskDidMoveFileSuccessfully: Notification.Name {
        .init(AFURLSessionDownloadTaskDidMoveFileSuccessfullyNotification)
    }
    /// AFNetworking's download-move-failed notification. Using it starts the posting.
    public static var AFURLSessionDownloadTaskDidFailToMoveFile: Notification.Name {
        .init(AFURLSessionDownloadTaskDidFailToMoveFileNotification)
    }
}
