import HawserCore

// A download takes its body by ownership: each read the engine gives away goes to the file as it
// is (DownloadTask.write(chunk:)), with no copy on the loop. Data tasks keep the engine's buffer:
// their body is gathered into one array anyway.
extension TaskDelegate: OwnedBodyDelegate {
    var takesBodyChunks: Bool { self.download != nil }

    func task(_ engine: RequestTask, didReceiveBodyChunk chunk: [UInt8]) {
        self.bindPhase(to: engine.eventLoop)
        if let download = self.download {
            download.write(chunk: chunk, engine: engine, channel: self.core.channel)
        } else {
            chunk.withUnsafeBytes { self.task(engine, didReceiveBody: $0) }
        }
    }
}
