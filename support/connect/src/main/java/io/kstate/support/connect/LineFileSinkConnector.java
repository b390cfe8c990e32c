package io.kstate.support.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * What Apache's FileStreamSinkConnector does: each record's value, as a line, in a file. Task {@code i} writes
 * {@code <file>.<i>} (several tasks never interleave their buffered writes in one file).
 */
public class LineFileSinkConnector extends SinkConnector {
    public static final String FILE = "file";
    public static final String TASK = "kstate.task";
    static final ConfigDef CONFIG = new ConfigDef()
            .define(FILE, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, ConfigDef.Importance.HIGH,
                    "Path of the output files: task i appends to <file>.<i>.");

    private Map<String, String> props;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineFileSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> out = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            Map<String, String> config = new HashMap<>(props);
            config.put(TASK, Integer.toString(i));
            out.add(config);
        }
        return out;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }
}
