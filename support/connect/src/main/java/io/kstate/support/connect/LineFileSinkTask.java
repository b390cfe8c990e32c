package io.kstate.support.connect;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** Appends each record's value as a line; flushes when the worker commits offsets (as FileStreamSinkTask). */
public class LineFileSinkTask extends SinkTask {
    private PrintStream out;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        String file = props.get(LineFileSinkConnector.FILE) + "." + props.get(LineFileSinkConnector.TASK);
        try {
            out = new PrintStream(
                    Files.newOutputStream(Paths.get(file), StandardOpenOption.CREATE, StandardOpenOption.APPEND),
                    false, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConnectException("cannot open " + file, e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        for (SinkRecord record : records) {
            out.println(record.value());
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        out.flush();
    }

    @Override
    public void stop() {
        if (out != null) {
            out.close();
        }
    }
}
